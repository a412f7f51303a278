/** The variables a blueprint template may use, as `{{name}}`. */
export const TEMPLATE_VARIABLES = [
  "intent",
  "issue.title",
  "issue.body",
  "issue.number",
  "repo",
  "branch",
  "failure.output",
] as const;
export type TemplateVariable = (typeof TEMPLATE_VARIABLES)[number];

const PLACEHOLDER = /\{\{\s*([A-Za-z][A-Za-z0-9_.]*)\s*\}\}/g;

/** The variable names a template refers to, in order, for validation. */
export function templateVariablesIn(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].map((match) => match[1] ?? "");
}

/**
 * Substitutes `{{name}}` placeholders in one pass, so text coming from a value (an issue body
 * containing `{{branch}}`, say) is never itself expanded. Unset variables render empty.
 */
export function renderTemplate(template: string, values: Partial<Record<TemplateVariable, string>>): string {
  return template.replace(PLACEHOLDER, (_match, name: string) => values[name as TemplateVariable] ?? "");
}
