// railscope's monitoring mixin: recording rules, alerts and Grafana dashboards from one set of
// parameters (config.libsonnet). Import it and override `_config`:
//
//   local railscope = (import 'railscope-mixin/mixin.libsonnet') + {
//     _config+:: { railscopeSelector: 'job="railscope"', runbookURLPattern: 'https://wiki.example/railscope#%s' },
//   };
//   { 'railscope.rules.yml': std.manifestYamlDoc(railscope.prometheusRules + railscope.prometheusAlerts) }
//
// or render everything with `python3 mixin/render.py` (see mixin/README.md).
(import 'config.libsonnet')
+ (import 'rules/rules.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ {
  grafanaDashboards+:: (import 'dashboards/dashboards.libsonnet')($._config),
}
