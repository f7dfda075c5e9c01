// @fermata/client against the real `fermata serve` over tls (test/helpers/client-suite.ts has the checks).
// Needs openssl for the certificate: skipped where it is missing, as test/integration/tls.test.ts is.
import { clientSuite } from '../helpers/client-suite.ts';

clientSuite('tls');
