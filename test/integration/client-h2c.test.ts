// @fermata/client against the real `fermata serve` over h2c (test/helpers/client-suite.ts has the checks).
import { clientSuite } from '../helpers/client-suite.ts';

clientSuite('h2c');
