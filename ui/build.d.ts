// The types of ui/build.js (plain JavaScript, run by bin/bundle.js before the pinned Node is of use).
export function buildUi(esbuild: typeof import('esbuild')): Promise<{ readonly script: string; readonly style: string }>;
