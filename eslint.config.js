// ESLint with typescript-eslint's type-aware rules: they catch what `tsc --strict` cannot,
// such as floating promises (a dropped teardown) and `any` values leaking across modules.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "coverage/", ".scratch/"] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      // Prettier wraps code at 120 but cannot break strings or comments; this catches those. A
      // line holding a URL may run long (a link cannot be split).
      "max-len": ["error", { code: 120, ignoreUrls: true }],
    },
  },
  {
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/no-non-null-assertion": "off",
    },
  },
  { files: ["eslint.config.js"], ...tseslint.configs.disableTypeChecked },
  {
    files: [".dependency-cruiser.cjs"],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      sourceType: "commonjs",
      globals: { module: "writable" },
      parserOptions: { projectService: false },
    },
  },
);
