// What the rule files share: the values their expressions interpolate, and what every alert
// takes from the config (its runbook link and any severity override).
{
  // A number as a PromQL literal: integers exactly, others to 15 significant digits (jsonnet's
  // own `%s` would print 0.2 as 0.20000000000000001).
  // (jsonnet's `%g` cannot print 0: it takes the logarithm).
  num(x):: if x == 0 then '0' else std.format('%.15g', x),

  // The `%(name)s` values of the rule expressions: `selector` (railscopeSelector), `cluster`
  // (clusterLabel, first in every `by` and `on` list), the durations (goneLookback,
  // nvlinkFecWindow, nvlinkDomainLookback), each of config.thresholds by its name, the XID
  // lists as regular expressions (xidHardware, xidWarning, xidApplication), and the values
  // `derived` and `bins` (below) compute; config.paramOverrides replaces any of them.
  params(config):: {
    selector: config.railscopeSelector,
    cluster: config.clusterLabel,
    goneLookback: config.goneLookback,
    nvlinkFecWindow: config.nvlinkFecWindow,
    nvlinkDomainLookback: config.nvlinkDomainLookback,
    neighbourGroupRegex: config.neighbourGroupRegex,
    xidHardware: std.join('|', [std.toString(x) for x in config.xids.hardware]),
    xidWarning: std.join('|', [std.toString(x) for x in config.xids.warning]),
    xidApplication: std.join('|', [std.toString(x) for x in config.xids.application]),
  } + {
    [k]: $.num(config.thresholds[$.derived[k][0]] * $.derived[k][1])
    for k in std.objectFields($.derived)
  } + {
    [k]: $.binRegex(config.thresholds[$.bins[k][0]], $.bins[k][1], $.bins[k][0])
    for k in std.objectFields($.bins)
  } + {
    [k]: $.num(config.thresholds[k])
    for k in std.objectFields(config.thresholds)
  } + config.paramOverrides,

  // The bins from `first` to `last` as a regular expression of their labels ("8|9|...|15").
  binRegex(first, last, name)::
    assert std.isNumber(first) && std.floor(first) == first && first >= 0 && first <= last :
           'thresholds.%s: an integer from 0 to %d' % [name, last];
    std.join('|', [std.toString(b) for b in std.range(first, last)]),

  // Values that are a range of histogram bins from a threshold to the last bin, as a regular
  // expression of the `bin` label, as name: [threshold, last bin]. Data, like `derived`, so
  // that mixin/render.py can write the same range into the Helm chart's rule template.
  bins:: {
    nvlinkFecHighBins: ['nvlinkFecHighBin', 15],
  },

  // Values derived from a threshold for the words of summaries and descriptions, as
  // name: [threshold, factor]. Data rather than code, so that mixin/render.py can write the
  // same arithmetic into the Helm chart's rule template.
  derived:: {
    railImbalancePercent: ['railImbalanceRatio', 100],
    railBusyGBps: ['railBusyBytesPerSecond', 1e-9],
    gpuThermalSlowdownPercent: ['gpuThermalSlowdownFraction', 100],
    gpuPowerBrakePercent: ['gpuPowerBrakeFraction', 100],
    railMiscabledMajorityPercent: ['railMiscabledMajority', 100],
  },

  // Every alert gets an absolute runbook_url from runbookURLPattern (the alert name in lower
  // case is its heading's anchor in alerts/RUNBOOK.md) and the severity severityOverrides gives
  // it. An override naming no alert stops the render: a typo would otherwise change nothing.
  finish(config, groups)::
    local names = std.set([r.alert for g in groups for r in g.rules if std.objectHas(r, 'alert')]);
    local unknown = [n for n in std.objectFields(config.severityOverrides) if !std.setMember(n, names)];
    local severities = std.set(['critical', 'warning', 'info']);
    local bad = [
      n
      for n in std.objectFields(config.severityOverrides)
      if !std.setMember(config.severityOverrides[n], severities)
    ];
    assert std.length(unknown) == 0 : 'severityOverrides: no alert is named ' + std.join(', ', unknown);
    assert std.length(bad) == 0 : 'severityOverrides: ' + std.join(', ', bad) + ': a severity is critical, warning or info';
    assert std.length(std.findSubstr('%s', config.runbookURLPattern)) == 1 : 'runbookURLPattern: needs one %s, where the alert name goes';
    [
      g {
        rules: [
          r {
            labels+: if std.objectHas(config.severityOverrides, r.alert)
            then { severity: config.severityOverrides[r.alert] }
            else {},
            annotations+: {
              runbook_url: std.format(config.runbookURLPattern, std.asciiLower(r.alert)),
            },
          }
          for r in g.rules
        ],
      }
      for g in groups
    ],
}
