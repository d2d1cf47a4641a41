// ESLint flat config (ESLint 9): the recommended rules of ESLint and typescript-eslint on the TypeScript sources.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig([
  // Build outputs and dependencies. The labextension is built into ../argus_lab/labextension, outside this
  // config's base path, so ESLint never lints it (it reports such files as "outside of base path").
  globalIgnores(['lib/', 'node_modules/', 'coverage/', '.yarn/']),
  {
    files: ['src/**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.recommended]
  }
]);
