// @fermata/client against the real `fermata serve` over http/1.1 (test/helpers/client-suite.ts has the checks).
import { clientSuite } from '../helpers/client-suite.ts';

clientSuite('http/1.1');
