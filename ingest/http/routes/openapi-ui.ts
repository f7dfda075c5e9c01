// The OpenAPI paths of the dashboard's files (routes/ui.ts), which openapi.ts puts among its
// paths: served without a token, like the health checks. Built once when the module loads; any thread.
import { httpErrorCodes } from '../error-map.ts';
import { errorResponse, open } from './openapi-parts.ts';

const notBuilt = 'NOT_FOUND: the dashboard was not built (`npm ci` builds it)';

export const uiPaths = {
  '/ui': {
    get: {
      operationId: 'getDashboard',
      summary: 'The dashboard (HTML)',
      description:
        'A single page that reads this API from the browser (same origin), sending the bearer token it asks for where tokens are configured. The page itself holds no data, so it needs no token. `Cache-Control: no-cache`; a Content-Security-Policy allows only its own script, style sheet and origin, and no framing.',
      security: open,
      responses: {
        '200': { description: 'The page.', content: { 'text/html': { schema: { type: 'string' } } } },
        '404': errorResponse(`${notBuilt}.`, [httpErrorCodes.notFound]),
      },
    },
  },
  '/ui/assets/{file}': {
    get: {
      operationId: 'getDashboardAsset',
      summary: "One of the dashboard's scripts or style sheets",
      description: 'Its name carries a hash of its content: `Cache-Control: public, max-age=31536000, immutable`.',
      security: open,
      parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
      responses: {
        '200': { description: 'The file.', content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } } },
        '404': errorResponse(`${notBuilt}, or it has no such file.`, [httpErrorCodes.notFound]),
      },
    },
  },
};
