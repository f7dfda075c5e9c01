// Style sheets imported for their side effect: esbuild bundles them into the page's one .css asset.
declare module '*.css';
