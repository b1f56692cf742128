#!/usr/bin/env python3
"""The Kubernetes manifests (dist/kubernetes/) and the Grafana dashboard
(dist/grafana/), checked offline.  Usage: k8s_test.py CASE

    manifests_valid     every object validates against the Kubernetes API's
                        schemas (npm kubernetes-models and
                        @kubernetes-models/prometheus-operator, installed
                        into the build directory); the Agones Fleet's own
                        fields against the fields and values of Agones' CRD
                        (fleets.agones.dev, the GameServer spec schema), its
                        pod template as a core PodTemplateSpec; a broken copy
                        is refused (the validation is not vacuous)
    sidecar_matches     the sidecar's ConfigMap configuration is what the real
                        binary accepts; the Agones port and the container's
                        ports are the configuration's listen and http ports;
                        the probes' and the scrape annotation's paths answer
                        200 from the binary run with that configuration (its
                        addresses moved to 127.0.0.1); the config mount is
                        the image's -c path (scripts/image.sh); the
                        recordings volume is the route's record directory
    dashboard_metrics   every metric and label the dashboard's queries use
                        is in a live /metrics after a Quake 3 capture replay
                        (pod and namespace come from Prometheus's scrape)

Environment: SLIPGATE, SG_BUILD_ROOT (npm packages go to
SG_BUILD_ROOT/k8s-npm, kept between runs), SG_TESTDATA.  Without node or
npm the test fails, saying so; npm must reach its registry on the first run.
"""

import copy
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(HERE, '..', 'http'))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

import harness  # noqa: E402
from harness import Fail, check, V4  # noqa: E402
from httplib_sg import request, replay_game, server_socket, q3cap  # noqa: E402

MANIFESTS = [os.path.join(ROOT, 'dist', 'kubernetes', f)
             for f in ('agones-sidecar.yaml', 'standalone.yaml')]
DASHBOARD = os.path.join(ROOT, 'dist', 'grafana', 'slipgate-dashboard.json')
NPM_PACKAGES = ['kubernetes-models@5.1.0', '@kubernetes-models/prometheus-operator@6.0.0',
                'yaml@2.8.1']

# From Agones' CRDs (googleforgames/agones install/helm/agones/templates/crds:
# fleet.yaml and _gameserverspecschema.yaml): the fields a Fleet's spec and a
# GameServer's spec take, and their enumerations.
AGONES_FLEET_SPEC = {'replicas', 'allocationOverflow', 'scheduling', 'strategy', 'priorities',
                     'template'}
AGONES_GS_SPEC = {'template', 'container', 'ports', 'sdkServer', 'scheduling', 'health',
                  'players', 'counters', 'lists', 'eviction'}
AGONES_PORT = {'name', 'portPolicy', 'protocol', 'container', 'containerPort', 'hostPort',
               'range'}
AGONES_HEALTH = {'disabled', 'initialDelaySeconds', 'periodSeconds', 'failureThreshold'}
AGONES_ENUMS = {'portPolicy': {'Dynamic', 'Static', 'Passthrough', 'None'},
                'protocol': {'UDP', 'TCP', 'TCPUDP'},
                'scheduling': {'Packed', 'Distributed'}}
DNS_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')


def npm_dir():
    for tool in ('node', 'npm'):
        if not shutil.which(tool):
            raise Fail('%s is not installed: the kubernetes tests validate with npm packages '
                       '(scripts/deps.sh --test installs nodejs and npm)' % tool)
    build_root = os.environ.get('SG_BUILD_ROOT')
    check(build_root, 'SG_BUILD_ROOT is not set (run through meson test)')
    d = os.path.join(build_root, 'k8s-npm')
    stamp = os.path.join(d, 'installed')
    want = ' '.join(NPM_PACKAGES)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other cases of this run wait for one install
        install(d, stamp, want)
    shutil.copy(os.path.join(HERE, 'validate.mjs'), os.path.join(d, 'validate.mjs'))
    return d


def install(d, stamp, want):
    if not (os.path.exists(stamp) and open(stamp).read() == want):
        r = subprocess.run(['npm', 'install', '--no-audit', '--no-fund', '--loglevel=error',
                            '--prefix', d] + NPM_PACKAGES, capture_output=True, text=True,
                           timeout=240)
        check(r.returncode == 0, 'npm install %s failed (%d):\n%s' % (want, r.returncode,
                                                                    r.stderr[-2000:]))
        with open(stamp, 'w') as f:
            f.write(want)


def validate(files):
    d = npm_dir()
    r = subprocess.run(['node', os.path.join(d, 'validate.mjs')] + files, capture_output=True,
                       text=True, timeout=120, cwd=d)
    check(r.returncode == 0, 'validate.mjs failed (%d):\n%s' % (r.returncode, r.stderr[-2000:]))
    out = json.loads(r.stdout)
    return out['docs'], out['errors']


def agones_errors(obj):
    """What in an Agones Fleet does not follow the CRD."""
    errs = []

    def keys(where, d, allowed):
        if not isinstance(d, dict):
            errs.append('%s: not an object' % where)
            return
        for k in d:
            if k not in allowed:
                errs.append('%s.%s: not a field of the Agones CRD' % (where, k))

    def enum(where, d, k):
        if k in d and d[k] not in AGONES_ENUMS[k]:
            errs.append('%s.%s: %r not one of %s' % (where, k, d[k], sorted(AGONES_ENUMS[k])))

    if obj.get('kind') != 'Fleet':
        return ['%s: only Fleet is checked here' % obj.get('kind')]
    spec = obj.get('spec', {})
    keys('spec', spec, AGONES_FLEET_SPEC)
    enum('spec', spec, 'scheduling')
    if not isinstance(spec.get('replicas', 0), int) or spec.get('replicas', 0) < 0:
        errs.append('spec.replicas: not an integer >= 0')
    tmpl = spec.get('template')
    if not isinstance(tmpl, dict):
        return errs + ['spec.template: missing (required)']
    keys('spec.template', tmpl, {'metadata', 'spec'})
    gs = tmpl.get('spec', {})
    keys('spec.template.spec', gs, AGONES_GS_SPEC)
    enum('spec.template.spec', gs, 'scheduling')
    pod = gs.get('template', {}).get('spec', {})
    names = [c.get('name') for c in pod.get('containers', [])]
    if not names:
        errs.append('spec.template.spec.template.spec.containers: missing (required, minItems 1)')
    for c in pod.get('containers', []):
        if not c.get('image'):
            errs.append('container %s: no image (required)' % c.get('name'))
        if c.get('name') and not DNS_LABEL.match(c['name']):
            errs.append('container %r: not a DNS label' % c['name'])
    if 'container' in gs and gs['container'] not in names:
        errs.append('spec.template.spec.container %r is none of the pod\'s containers %r'
                    % (gs['container'], names))
    ports = gs.get('ports')
    if not isinstance(ports, list) or not ports:
        errs.append('spec.template.spec.ports: an array of at least one port')
        ports = []
    for i, p in enumerate(ports):
        w = 'spec.template.spec.ports[%d]' % i
        keys(w, p, AGONES_PORT)
        enum(w, p, 'portPolicy')
        enum(w, p, 'protocol')
        for k in ('containerPort', 'hostPort'):
            if k in p and not (isinstance(p[k], int) and 1 <= p[k] <= 65535):
                errs.append('%s.%s: not an integer 1-65535' % (w, k))
        if p.get('portPolicy') == 'Static' and 'hostPort' not in p:
            errs.append('%s: Static needs hostPort' % w)
        if 'container' in p and p['container'] not in names:
            errs.append('%s.container %r is none of the pod\'s containers' % (w, p['container']))
    if 'health' in gs:
        keys('spec.template.spec.health', gs['health'], AGONES_HEALTH)
    return errs


def case_manifests_valid(h):
    docs, errors = validate(MANIFESTS)
    check(not errors, 'the manifests do not validate:\n' + '\n'.join(errors))
    kinds = sorted('%s/%s' % (d['obj']['apiVersion'], d['obj']['kind']) for d in docs)
    for want in ('agones.dev/v1/Fleet', 'apps/v1/Deployment', 'monitoring.coreos.com/v1/'
                 'ServiceMonitor', 'v1/PersistentVolumeClaim', 'v1/Service', 'v1/ConfigMap'):
        check(want in kinds, 'no %s among %s' % (want, kinds))
    fleets = [d['obj'] for d in docs if d['obj']['kind'] == 'Fleet']
    for f in fleets:
        errs = agones_errors(f)
        check(not errs, 'the Fleet does not follow the Agones CRD:\n' + '\n'.join(errs))
    lb = [d['obj'] for d in docs if d['obj']['kind'] == 'Service'
          and d['obj']['spec'].get('type') == 'LoadBalancer']
    check(lb and all(s['spec'].get('externalTrafficPolicy') == 'Local' for s in lb),
          'the UDP LoadBalancer Service does not keep client addresses (externalTrafficPolicy)')

    # Not vacuous: broken copies are refused, by each check.
    broken = copy.deepcopy(fleets[0])
    broken['spec']['template']['spec']['ports'][0]['portPolicy'] = 'Sometimes'
    broken['spec']['template']['spec']['helth'] = {}
    errs = agones_errors(broken)
    check(len(errs) == 2, 'the Agones check let a broken Fleet through: %r' % errs)
    bad = os.path.join(h.dir, 'bad.yaml')
    with open(bad, 'w') as f:
        f.write('apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n'
                '  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n'
                '    spec:\n      containers:\n        - name: c\n          image: i\n'
                '          ports: [{containerPort: "http"}]\n')
    _, errors = validate([bad])
    check(len(errors) == 1 and 'containerPort' in errors[0],
          'a Deployment with a string containerPort was not refused: %r' % errors)
    print('%d objects valid: %s' % (len(docs), ', '.join(kinds)))


def sidecar_objects():
    docs, errors = validate(MANIFESTS[:1])
    check(not errors, '\n'.join(errors))
    objs = [d['obj'] for d in docs]
    conf = next(o for o in objs if o['kind'] == 'ConfigMap')['data']['slipgate.conf']
    fleet = next(o for o in objs if o['kind'] == 'Fleet')
    return objs, conf, fleet


def conf_value(conf, name):
    m = re.search(r'^\s*%s\s+(\S+)' % name, conf, re.M)
    check(m, 'no %s in the ConfigMap\'s slipgate.conf' % name)
    return m.group(1)


def case_sidecar_matches(h):
    objs, conf, fleet = sidecar_objects()
    gs = fleet['spec']['template']['spec']
    pod = gs['template']['spec']
    sg = next(c for c in pod['containers'] if c['name'] == 'slipgate')
    listen_port = int(conf_value(conf, 'listen').rsplit(':', 1)[1])
    http_port = int(conf_value(conf, 'http').rsplit(':', 1)[1])
    record = conf_value(conf, 'record')
    route = re.search(r'^\s*route\s+(\S+)\s*\{', conf, re.M).group(1)

    # The Agones port leads to slipgate's listening port.
    agp = gs['ports'][0]
    check(agp['container'] == 'slipgate' and agp['containerPort'] == listen_port
          and agp.get('protocol', 'UDP') == 'UDP',
          'the Agones port %r is not slipgate\'s UDP %d' % (agp, listen_port))
    ports = {p['name']: p for p in sg['ports']}
    check(ports['game']['containerPort'] == listen_port and ports['game']['protocol'] == 'UDP',
          'container port game %r, the configuration listens on %d' % (ports['game'],
                                                                      listen_port))
    check(ports['http']['containerPort'] == http_port,
          'container port http %r, the configuration serves http on %d' % (ports['http'],
                                                                          http_port))
    probes = {k: sg[k]['httpGet'] for k in ('livenessProbe', 'readinessProbe')}
    for k, g in probes.items():
        check(g['port'] in ('http', http_port), '%s port %r is not http' % (k, g['port']))
    ann = fleet['spec']['template']['spec']['template']['metadata']['annotations']
    check(int(ann['prometheus.io/port']) == http_port, 'prometheus.io/port %s' %
          ann['prometheus.io/port'])

    # The mounts: the configuration where the image reads it, the recordings
    # where the route records.
    with open(os.path.join(ROOT, 'scripts', 'image.sh')) as f:
        m = re.search(r'ENTRYPOINT=\[(.*?)\]', f.read())
    entry = json.loads('[%s]' % m.group(1))
    conf_path = entry[entry.index('-c') + 1]
    mounts = {v['name']: v for v in sg['volumeMounts']}
    check(mounts['config']['mountPath'] == conf_path,
          'the config is mounted on %s, the image reads %s' % (mounts['config']['mountPath'],
                                                               conf_path))
    check(mounts['recordings']['mountPath'] == record,
          'the recordings volume is on %s, the route records into %s'
          % (mounts['recordings']['mountPath'], record))
    vols = {v['name']: v for v in pod['volumes']}
    check('persistentVolumeClaim' in vols['recordings'], 'recordings are not on a PVC')
    pvcs = [o['metadata']['name'] for o in objs if o['kind'] == 'PersistentVolumeClaim']
    check(vols['recordings']['persistentVolumeClaim']['claimName'] in pvcs,
          'the recordings claim is none of %r' % pvcs)
    drain = re.search(r'^\s*drain_timeout\s+(\d+)s', conf, re.M)
    check(drain and pod['terminationGracePeriodSeconds'] > int(drain.group(1)),
          'terminationGracePeriodSeconds %s does not outlast drain_timeout'
          % pod.get('terminationGracePeriodSeconds'))

    # The binary with that configuration (addresses moved to loopback, the
    # record directory to ours) serves the probes' and the scrape's paths.
    path = os.path.join(h.dir, 'sidecar.conf')
    with open(path, 'w') as f:
        f.write(conf)
    demos = h.path('demos')
    os.mkdir(demos)
    px = h.proxy(None, args=('-c', path, '+set', 'http', '127.0.0.1:$P0', '+set',
                             route + '.listen', '127.0.0.1:$P1', '+set', route + '.record', demos))
    px.wait_for_log(r'http: serving on', 5)
    for k, g in probes.items():
        status, _, body = request(px.ports[0], g['path'])
        check(status == 200, '%s %s: %s %r' % (k, g['path'], status, body))
    status, _, body = request(px.ports[0], ann['prometheus.io/path'])
    check(status == 200 and b'slipgate_sessions_active' in body,
          '%s: %s' % (ann['prometheus.io/path'], status))
    check(px.stop() == 0, 'exit status')
    print('ports game %d/udp, http %d; probes %s; config %s; recordings %s'
          % (listen_port, http_port, ' '.join(g['path'] for g in probes.values()), conf_path,
             record))


def case_dashboard_metrics(h):
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t['expr'] for p in dash['panels'] for t in p.get('targets', [])]
    exprs += [v['query']['query'] for v in dash['templating']['list']
              if isinstance(v.get('query'), dict)]
    check(len(exprs) >= 10, 'only %d queries in the dashboard' % len(exprs))
    srv = server_socket()
    h.sockets.append(srv)
    demos = h.path('demos')
    conf = ('http 127.0.0.1:$P0\nroute game {\n    listen 127.0.0.1:$P1\n    server 127.0.0.1:%d\n'
            '    protocol q3\n    record %s\n    filter guard { }\n}\n'
            % (srv.getsockname()[1], demos))
    px = h.proxy(conf)
    px.wait_for_log(r'http: serving on', 5)
    sent, got = replay_game(q3cap.Capture('ioq71'), px.ports[1], srv)
    check(got >= sent - 20, 'replay: %d sent, %d arrived' % (sent, got))
    status, _, body = request(px.ports[0], '/metrics')
    check(status == 200, '/metrics: %s' % status)
    series = {}
    for line in body.decode().splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s', line)
        if m:
            labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ''))
            series.setdefault(m.group(1), set()).update(labels)
    px.stop()
    scrape_labels = {'pod', 'namespace', 'instance', 'job'}  # added by Prometheus
    missing = []
    for e in exprs:
        for name, sel in re.findall(r'(slipgate_[a-z0-9_]+)(\{[^}]*\})?', e):
            if name not in series:
                missing.append('%s (in %s)' % (name, e))
                continue
            used = set(re.findall(r'([a-z_]+)\s*=~?', sel or ''))
            for by in re.findall(r'by \(([^)]*)\)', e):
                used |= {x.strip() for x in by.split(',')}
            used |= set(re.findall(r'label_values\([^,]*,\s*([a-z_]+)\)', e))
            extra = used - series[name] - scrape_labels
            if extra:
                missing.append('%s has no label %s (in %s)' % (name, sorted(extra), e))
    check(not missing, 'the dashboard asks for what /metrics does not have:\n'
          + '\n'.join(missing))
    print('%d queries, %d metric families in /metrics, all found'
          % (len(exprs), len(series)))


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
