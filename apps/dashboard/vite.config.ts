import { defineConfig } from 'vite';

// The fleet page is served by the panel under /dashboard/ (apps/control-panel/src/http/dashboard.ts):
// every file comes from the panel itself, no CDN, and no inline script (the CSP allows only 'self').
export default defineConfig({
  base: '/dashboard/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // Inline <script>s would need 'unsafe-inline' in the CSP.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    target: 'es2022',
  },
});
