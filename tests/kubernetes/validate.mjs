// Parse the manifests given as arguments (YAML, several documents each) and
// validate every Kubernetes object against the API's schemas with the npm
// packages kubernetes-models and @kubernetes-models/prometheus-operator
// (their validate(): types, required fields, enums, formats; unknown fields
// are not reported).  An Agones Fleet or GameServer has its pod template
// validated as a core PodTemplateSpec; its own fields are checked by
// k8s_test.py against the Agones CRD.  Prints {"docs": [...], "errors": [...]}
// as JSON on stdout; exit 0 even with errors (the caller reports them).
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

const groups = {
  'v1': 'kubernetes-models/v1/',
  'apps/v1': 'kubernetes-models/apps/v1/',
  'monitoring.coreos.com/v1': '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/',
};

async function check(where, module, name, data, errors) {
  let Model;
  try {
    Model = (await import(module + name))[name];
  } catch (e) {
    errors.push(`${where}: no model ${module}${name}: ${e.message}`);
    return;
  }
  try {
    new Model(data).validate();
  } catch (e) {
    errors.push(`${where}: ${e.message}`);
  }
}

const docs = [], errors = [];
for (const file of process.argv.slice(2)) {
  const parsed = parseAllDocuments(readFileSync(file, 'utf8'));
  for (const [i, d] of parsed.entries()) {
    const where = `${file} document ${i + 1}`;
    if (d.errors.length) {
      errors.push(`${where}: YAML: ${d.errors.map((e) => e.message).join('; ')}`);
      continue;
    }
    const obj = d.toJS();
    if (!obj) continue;
    docs.push({ file, obj });
    const what = `${where} (${obj.apiVersion} ${obj.kind} ${obj.metadata && obj.metadata.name})`;
    if (obj.apiVersion === 'agones.dev/v1') {
      const gs = obj.kind === 'Fleet' ? obj.spec && obj.spec.template && obj.spec.template.spec
                                      : obj.spec;
      const pod = gs && gs.template;
      if (!pod) errors.push(`${what}: no pod template`);
      else await check(`${what} pod template`, 'kubernetes-models/v1/', 'PodTemplateSpec', pod,
                       errors);
      continue;
    }
    const module = groups[obj.apiVersion];
    if (!module) {
      errors.push(`${what}: no schema known for apiVersion ${obj.apiVersion}`);
      continue;
    }
    await check(what, module, obj.kind, obj, errors);
  }
}
process.stdout.write(JSON.stringify({ docs, errors }));
