// Type-aware lint: no-floating-promises matters here, a dropped promise is a lost log row.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'eslint.config.js',
      'dist/**',
      'node_modules/**',
      'web/dist/**',
      'data/**',
      'test-results/**',
      'bin/**',
    ],
  },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='process'][property.name='env']",
          message: 'Only src/config.ts reads process.env.',
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'fetch', message: 'Use undici request/stream for upstream calls.' },
      ],
    },
  },
  {
    files: ['src/config.ts', 'test/**', 'bench/**', 'web/**', '**/*.test.ts', 'vitest.config.ts'],
    rules: { 'no-restricted-syntax': 'off', 'no-restricted-globals': 'off' },
  },
  {
    files: ['src/proxy/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/console-api/**'], message: 'proxy/ never imports console-api/.' }] },
      ],
    },
  },
  {
    files: ['test/**', '**/*.test.ts', 'bench/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
