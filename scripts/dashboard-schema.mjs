// Validates Grafana dashboard JSON files against the dashboard schema that Grafana
// publishes in the @grafana/schema npm package: TypeScript types generated from
// Grafana's CUE "dashboard" kind (the classic v1 JSON model that provisioning loads),
// and from each panel plugin's "panelcfg" kind (its options and custom field config).
// The package ships no JSON Schema, so each dashboard becomes a TypeScript module
//
//   export const dashboard = <the JSON> satisfies Json<Dashboard>;
//   export const panel_3 = <panel 3's options> satisfies DeepPartial<StatOptions>;
//   ...
//
// type-checked by the TypeScript compiler (strict): a wrong field type, a value
// outside an enum (a variable type, a hide/refresh/sort value, a panel's colorMode
// or legend displayMode), a missing required field (schemaVersion, a panel's type,
// a target's refId) or a misspelled key (excess-property check) fails, with the
// dashboard path of the offending value. Panel options may omit fields (Grafana
// fills defaults), hence DeepPartial. A panel type without a panelcfg kind here fails
// until it is added to PANEL_KINDS.
//
//   node scripts/dashboard-schema.mjs NODE_PREFIX DASHBOARD.json...
//
// NODE_PREFIX: an npm prefix holding @grafana/schema and typescript
// (scripts/chart-test.sh installs them once into the tools cache, pinned).

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [prefix, ...files] = process.argv.slice(2);
if (!prefix || files.length === 0) {
  console.error('usage: node scripts/dashboard-schema.mjs NODE_PREFIX DASHBOARD.json...');
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(prefix), 'package.json'));
const ts = require('typescript');
const schemaVersion = require('@grafana/schema/package.json').version;

// panel type -> [module of its panelcfg kind, options type, custom field config type or null]
const PANEL_KINDS = {
  stat: ['stat/panelcfg/x/StatPanelCfg_types.gen', 'Options', null],
  table: ['table/panelcfg/x/TablePanelCfg_types.gen', 'Options', 'FieldConfig'],
  bargauge: ['bargauge/panelcfg/x/BarGaugePanelCfg_types.gen', 'Options', null],
  timeseries: ['timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen', 'Options', 'FieldConfig'],
  logs: ['logs/panelcfg/x/LogsPanelCfg_types.gen', 'Options', null],
};

const work = fs.mkdtempSync(path.join(path.resolve(prefix), 'check-'));
let failed = 0;
try {
  const roots = [];
  const origins = new Map(); // generated file -> [dashboard file, line -> JSON path]
  for (const [index, file] of files.entries()) {
    let dashboard;
    try {
      dashboard = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      console.error(`${file}: not JSON: ${e.message}`);
      failed++;
      continue;
    }
    const lines = [];
    const paths = new Map();
    const imports = new Set();
    const emit = (text, jsonPath) => {
      for (const line of text.split('\n')) {
        lines.push(line);
        if (jsonPath !== undefined) paths.set(lines.length, jsonPath);
      }
    };
    // JSON with a path per line, for readable errors.
    const literal = (value, at) => {
      const out = [];
      const walk = (v, p, indent, key) => {
        const pad = '  '.repeat(indent);
        const head = key === undefined ? '' : `${JSON.stringify(key)}: `;
        if (Array.isArray(v)) {
          out.push([`${pad}${head}[`, p]);
          v.forEach((x, i) => walk(x, `${p}[${i}]`, indent + 1));
          out.push([`${pad}],`, p]);
        } else if (v !== null && typeof v === 'object') {
          out.push([`${pad}${head}{`, p]);
          for (const [k, x] of Object.entries(v)) walk(x, `${p}.${k}`, indent + 1, k);
          out.push([`${pad}},`, p]);
        } else {
          out.push([`${pad}${head}${JSON.stringify(v)},`, p]);
        }
      };
      walk(value, at, 1);
      const last = out[out.length - 1];
      last[0] = last[0].replace(/,$/, '');
      return out;
    };
    const declare = (name, value, at, type) => {
      emit(`export const ${name} = (`);
      for (const [text, p] of literal(value, at)) emit(text, p);
      emit(`) satisfies ${type};`);
    };
    const panels = [];
    for (const [i, p] of (dashboard.panels ?? []).entries()) {
      panels.push([p, `panels[${i}]`]);
      for (const [j, q] of (p.panels ?? []).entries()) panels.push([q, `panels[${i}].panels[${j}]`]);
    }
    const checks = [];
    for (const [panel, at] of panels) {
      if (panel.type === 'row') continue;
      const kind = PANEL_KINDS[panel.type];
      if (!kind) {
        console.error(`${file}: ${at} (${JSON.stringify(panel.title)}): panel type ${JSON.stringify(panel.type)} has no panelcfg kind in scripts/dashboard-schema.mjs PANEL_KINDS`);
        failed++;
        continue;
      }
      const [module, options, custom] = kind;
      const alias = panel.type.replace(/[^a-z]/g, '');
      imports.add(`import type { ${options} as ${alias}Options${custom ? `, ${custom} as ${alias}FieldConfig` : ''} } from '@grafana/schema/dist/esm/raw/composable/${module}';`);
      checks.push([`${alias}Options`, panel.options ?? {}, `${at}.options`]);
      if (custom && panel.fieldConfig?.defaults?.custom) {
        checks.push([`${alias}FieldConfig`, panel.fieldConfig.defaults.custom, `${at}.fieldConfig.defaults.custom`]);
      }
    }
    emit("import type { Dashboard } from '@grafana/schema';");
    for (const line of imports) emit(line);
    // JSON holds an enum's values, not its TypeScript names: string enums become the
    // union of their values (`${E}`); numeric enums accept their number literals as is.
    emit('type Json<T> = T extends string ? `${T}` : T extends readonly (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;');
    emit('type DeepPartial<T> = T extends string ? `${T}` : T extends readonly (infer U)[] ? DeepPartial<U>[] : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;');
    declare('dashboard', dashboard, '', 'Json<Dashboard>');
    checks.forEach(([type, value, at], n) => declare(`check_${n}`, value, at, `DeepPartial<${type}>`));
    const generated = path.join(work, `dashboard_${index}.ts`);
    fs.writeFileSync(generated, lines.join('\n') + '\n');
    roots.push(generated);
    origins.set(generated, [file, paths, panels.filter(([p]) => p.type !== 'row').length]);
  }
  const program = ts.createProgram(roots, {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    skipLibCheck: true,
    types: [],
  });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  for (const d of diagnostics) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n  ');
    const origin = d.file && origins.get(path.resolve(d.file.fileName));
    if (!origin) {
      console.error(`schema check: ${message}`);
      failed++;
      continue;
    }
    const [file, paths] = origin;
    const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    const at = paths.get(line + 1) ?? '(dashboard)';
    console.error(`${file}: ${at || '(top level)'}: ${message}`);
    failed++;
  }
  for (const [, [file, , panelCount]] of origins) {
    if (!diagnostics.some((d) => d.file && origins.get(path.resolve(d.file.fileName))?.[0] === file)) {
      console.log(`${file}: valid against @grafana/schema ${schemaVersion} (dashboard kind + ${panelCount} panels' panelcfg kinds)`);
    }
  }
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
