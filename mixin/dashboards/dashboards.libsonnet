// railscope's Grafana dashboards, by file name, from the mixin's `_config`:
//
//   jsonnet -J mixin -e '(import "dashboards/dashboards.libsonnet")((import "config.libsonnet")._config)'
//
// python3 mixin/render.py writes them to dashboards/*.json.
function(config) {
  'railscope-node.json': (import 'node.libsonnet')(config),
  'railscope-fleet.json': (import 'fleet.libsonnet')(config),
}
