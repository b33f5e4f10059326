// Helpers of railscope's Grafana dashboards: selectors, rail narrowing, query targets and the
// panel layout. `(import 'lib.libsonnet')(config)` with the mixin's `_config`.
//
// The dashboards are generated: edit the jsonnet under mixin/dashboards and the parameters in
// mixin/config.libsonnet, then run
//
//     python3 mixin/render.py          # rewrite dashboards/*.json (and the rules)
//     python3 mixin/render.py --check  # fail when a file differs from what it would write
//
// Queries follow three rules (tests/tests/rules/dashboards.rs checks them):
//   * every selector of an exported series carries job=~"$job" and instance=~"$instance"
//     (and <clusterLabel>=~"$cluster" with showMultiCluster);
//   * port, GPU and NIC series are narrowed to the chosen rails with
//     `unless on (instance, device, port) railscope_rail_info{..., rail!~"$rail"}`, which keeps
//     ports that have no rail at all (front-end and storage NICs) and drops those of other rails;
//   * only fleet-wide peer values (the recording rules `*:median_by_*`) are not narrowed by node.
//
// Panels are built as a list of specs ({kind: 'row'} or {kind: 'panel', w, h, panel}) that
// `layout` folds into positioned panels with ids, the way Grafana places them: left to right,
// wrapping at 24 columns, and panels after a collapsed row inside that row.
function(config) {
  local lib = self,
  local multi = config.showMultiCluster,

  // Joins label matchers, leaving out empty ones.
  matchers(list):: std.join(', ', std.filter(function(m) m != '', list)),

  // `<clusterLabel>=~"$cluster"` with showMultiCluster, '' without.
  clusterMatcher:: if multi then config.clusterLabel + '=~"$cluster"' else '',

  DS:: { type: 'prometheus', uid: '${datasource}' },
  // The matchers of every selector of an exported series.
  S:: lib.matchers([lib.clusterMatcher, 'job=~"$job"', 'instance=~"$instance"']),

  RAIL_NE:: 'rail!~"$rail"',
  RAIL_EQ:: 'rail=~"$rail"',
  GPU_RAIL_NE:: 'gpu!="", rail!~"$rail"',
  NIC_GPU:: 'role=~"nic|gpu"',
  LOST:: 'state="lost"',
  NOT_OK:: 'state!="ok"',

  // A selector of an exported series, narrowed by job and instance.
  sel(metric, extra=''):: metric + '{' + lib.S + (if extra != '' then ', ' + extra else '') + '}',

  // A fleet-level recording rule (`*:median_by_*`): not narrowed by node; by cluster with
  // showMultiCluster (the rules keep the cluster label, so peers never mix clusters).
  fleetSel(name):: if multi then name + '{' + lib.clusterMatcher + '}' else name,

  // The firing railscope alerts of the chosen nodes.
  ALERTS:: 'ALERTS{alertname=~"Railscope.*", alertstate="firing", ' + lib.S + '}',

  rate(metric, extra='', fn='rate', rng='$__rate_interval')::
    fn + '(' + lib.sel(metric, extra) + '[' + rng + '])',

  // Drops ports of rails other than $rail (ports without a rail stay).
  railPort(expr)::
    '(' + expr + ') unless on (instance, device, port) ' + lib.sel('railscope_rail_info', lib.RAIL_NE),
  railDevice(expr)::
    '(' + expr + ') unless on (instance, device) ' + lib.sel('railscope_rail_info', lib.RAIL_NE),
  railGpu(expr)::
    '(' + expr + ') unless on (instance, gpu) ' + lib.sel('railscope_rail_info', lib.GPU_RAIL_NE),
  // NIC PCI functions of other rails dropped (GPUs and bridges stay).
  railPci(expr)::
    '(' + expr + ') unless on (instance, pci_address) ' + lib.sel('railscope_rail_info', lib.RAIL_NE),
  // Adds the rail label to a port series (ports without a rail are dropped).
  withRail(expr)::
    expr + ' * on (instance, device, port) group_left (rail) ' + lib.sel('railscope_rail_info', lib.RAIL_EQ),
  // Sums a port expression per rail across the chosen nodes.
  perRail(expr):: 'sum by (rail) (' + lib.withRail(expr) + ')',

  // Collapses runs of white space to one space, as the queries are written over many lines.
  oneLine(s)::
    local spaced = std.strReplace(std.strReplace(std.strReplace(s, '\n', ' '), '\t', ' '), '\r', ' ');
    std.join(' ', std.filter(function(w) w != '', std.split(spaced, ' '))),

  // A query target; refIds are given by the panel.
  t(expr, legend='', instant=false, fmt=null)::
    { datasource: lib.DS, expr: lib.oneLine(expr), legendFormat: legend }
    + (
      if instant
      then { instant: true, range: false, format: if fmt == null then 'table' else fmt }
      else { instant: false, range: true, format: if fmt == null then 'time_series' else fmt }
    ),

  GREEN:: { color: 'green', value: null },
  // Threshold steps: green, then [value, color] pairs.
  steps(pairs):: [lib.GREEN] + [{ color: p[1], value: p[0] } for p in pairs],
  redBelow(v):: [{ color: 'red', value: null }, { color: 'green', value: v }],

  PORT_STATE:: {
    '1': { text: 'DOWN', color: 'red' },
    '2': { text: 'INIT', color: 'orange' },
    '3': { text: 'ARMED', color: 'yellow' },
    '4': { text: 'ACTIVE', color: 'green' },
    '5': { text: 'ACTIVE_DEFER', color: 'yellow' },
  },
  PHYS_STATE:: {
    '1': { text: 'Sleep', color: 'red' },
    '2': { text: 'Polling', color: 'red' },
    '3': { text: 'Disabled', color: 'red' },
    '4': { text: 'PortConfigurationTraining', color: 'orange' },
    '5': { text: 'LinkUp', color: 'green' },
    '6': { text: 'LinkErrorRecovery', color: 'orange' },
    '7': { text: 'Phy Test', color: 'purple' },
  },
  DISTANCE:: {
    '10': { text: 'PIX', color: 'green' },
    '20': { text: 'PXB', color: 'green' },
    '30': { text: 'PHB', color: 'yellow' },
    '40': { text: 'NODE', color: 'orange' },
    '50': { text: 'SYS', color: 'red' },
  },
  UPDOWN:: { '0': { text: 'no', color: 'red' }, '1': { text: 'yes', color: 'green' } },

  PORT:: '{{device}}/{{port}}',
  NODE_PORT:: '{{instance}} {{device}}/{{port}}',
  HW_CNP:: 'np_cnp_sent|rp_cnp_handled|np_ecn_marked_roce_packets',
  HW_RETRANS:: 'local_ack_timeout_err|out_of_sequence|packet_seq_err|implied_nak_seq_err'
               + '|rnr_nak_retry_err|duplicate_request|roce_adp_retrans|roce_adp_retrans_to'
               + '|roce_slow_restart',

  // Table rows of the fleet dashboard open the node dashboard of their node.
  NODE_LINK:: [{
    title: 'Open the node dashboard',
    url: '/d/' + config.dashboardUIDs.node + '/railscope-node?${__url_time_range}&${datasource:queryparam}'
         + (if multi then '&${cluster:queryparam}' else '')
         + '&${job:queryparam}&var-instance=${__data.fields.instance}',
  }],

  // ---------------------------------------------------------------------------------------
  // Panel specs. Each returns {kind: 'panel', w, h, panel} without id and gridPos; `layout`
  // places them.

  row(title, collapsed=false):: { kind: 'row', title: title, collapsed: collapsed },

  panel(ptype,
        title,
        targets,
        w=12,
        h=8,
        unit=null,
        desc='',
        options=null,
        defaults=null,
        overrides=null,
        transformations=null):: {
    kind: 'panel',
    w: w,
    h: h,
    panel: {
      type: ptype,
      title: title,
      description: desc,
      datasource: lib.DS,
      fieldConfig: {
        defaults: (if unit != null && unit != '' then { unit: unit } else {})
                  + (if defaults == null then {} else defaults),
        overrides: if overrides == null then [] else overrides,
      },
      options: if options == null then {} else options,
      targets: [targets[i] { refId: std.char(std.codepoint('A') + i) } for i in std.range(0, std.length(targets) - 1)],
    } + (
      if transformations != null && std.length(transformations) > 0
      then { transformations: transformations }
      else {}
    ),
  },

  // A threshold line (dashed, red) where an alert fires.
  alertLine(value):: {
    custom+: { thresholdsStyle: { mode: 'dashed' } },
    thresholds: {
      mode: 'absolute',
      steps: [{ color: 'transparent', value: null }, { color: 'red', value: value }],
    },
  },

  // A time series panel; `alertAt` draws a dashed red line where an alert fires; `custom` is
  // merged into fieldConfig.defaults.custom (e.g. a log scale).
  ts(title, targets, unit=null, w=12, h=8, desc='', stack=false, defaults=null, alertAt=null, custom={})::
    local d = { custom: { fillOpacity: 10, showPoints: 'never', lineWidth: 1 } }
              + (if stack then { custom+: { stacking: { mode: 'normal', group: 'A' } } } else {})
              + (if alertAt != null then lib.alertLine(alertAt) else {})
              + { custom+: custom }
              + (if defaults == null then {} else defaults);
    local opts = {
      legend: { displayMode: 'table', placement: 'right', calcs: ['lastNotNull', 'max'], showLegend: true },
      tooltip: { mode: 'multi', sort: 'desc' },
    };
    lib.panel('timeseries', title, targets, w, h, unit, desc, opts, d),

  timeline(title, targets, mappings, w=12, h=8, desc='')::
    local d = {
      mappings: [{ type: 'value', options: mappings }],
      color: { mode: 'thresholds' },
      thresholds: { mode: 'absolute', steps: [lib.GREEN] },
    };
    local opts = {
      showValue: 'auto',
      mergeValues: true,
      rowHeight: 0.9,
      legend: { displayMode: 'list', placement: 'bottom', showLegend: false },
    };
    lib.panel('state-timeline', title, targets, w, h, null, desc, opts, d),

  stat(title, targets, unit=null, w=4, h=4, desc='', thresholds=null, mappings=null)::
    local d = {
      color: { mode: 'thresholds' },
      thresholds: {
        mode: 'absolute',
        steps: if thresholds != null && std.length(thresholds) > 0 then thresholds else [lib.GREEN],
      },
    } + (if mappings != null && std.length(mappings) > 0 then { mappings: [{ type: 'value', options: mappings }] } else {});
    local opts = {
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
      colorMode: 'background',
      graphMode: 'none',
      textMode: 'value_and_name',
      justifyMode: 'auto',
      orientation: 'auto',
    };
    lib.panel('stat', title, targets, w, h, unit, desc, opts, d),

  table(title,
        targets,
        unit=null,
        w=12,
        h=8,
        desc='',
        hide=['Time'],
        merge=null,
        matrix=null,
        thresholds=null,
        mappings=null,
        links=null,
        sort=null,
        order=null)::
    local doMerge = if merge != null then merge else std.length(targets) > 1;
    // The cluster column says nothing with one cluster chosen.
    local excluded = hide + ['__name__', 'job'] + (if multi then [config.clusterLabel] else []);
    // `order`: the columns to show first, in this order (the others follow).
    local indexed = if order != null then { indexByName: { [order[i]]: i for i in std.range(0, std.length(order) - 1) } } else {};
    local tr = (if doMerge then [{ id: 'merge', options: {} }] else [])
               + (
                 if matrix != null
                 then [{ id: 'groupingToMatrix', options: { rowField: matrix[0], columnField: matrix[1], valueField: 'Value' } }]
                 else [{ id: 'organize', options: { excludeByName: { [n]: true for n in excluded }, renameByName: {} } + indexed }]
               );
    local hasThresholds = thresholds != null && std.length(thresholds) > 0;
    local d = { custom: { align: 'auto', cellOptions: { type: 'auto' } } }
              + (
                if hasThresholds then {
                  color: { mode: 'thresholds' },
                  thresholds: { mode: 'absolute', steps: thresholds },
                  custom+: { cellOptions: { type: 'color-background' } },
                } else {}
              )
              + (if mappings != null && std.length(mappings) > 0 then { mappings: [{ type: 'value', options: mappings }] } else {})
              + (if links != null && std.length(links) > 0 then { links: links } else {});
    local opts = { showHeader: true, cellHeight: 'sm', footer: { show: false } }
                 + (if sort != null then { sortBy: [{ displayName: sort[0], desc: sort[1] }] } else {});
    lib.panel('table', title, targets, w, h, unit, desc, opts, d, transformations=tr),

  // ---------------------------------------------------------------------------------------
  // Runbook links: a panel whose data is what an alert fires on links to that alert's runbook
  // entry. The table (panel title → alert names) is runbooks.libsonnet.

  runbooks:: import 'runbooks.libsonnet',

  runbookLink(alert):: {
    title: 'Runbook: ' + alert,
    url: std.format(config.runbookURLPattern, std.asciiLower(alert)),
    targetBlank: true,
  },

  // Adds the runbook links of `table` to the panels it names; every title it names must be a
  // panel of the dashboard.
  withRunbooks(items, table)::
    local titles = [it.panel.title for it in items if it.kind == 'panel'];
    local unknown = [k for k in std.objectFields(table) if !std.member(titles, k)];
    assert unknown == [] : 'runbooks.libsonnet names panels that do not exist: ' + std.join(', ', unknown);
    [
      if it.kind == 'panel' && std.objectHas(table, it.panel.title)
      then it { panel+: { links: [lib.runbookLink(a) for a in table[it.panel.title]] } }
      else it
      for it in items
    ],

  // ---------------------------------------------------------------------------------------
  // Layout: folds the specs into panels with ids and grid positions. A panel that does not fit
  // in the 24 columns left of the current line starts a new line below the tallest panel of
  // the line; a row starts a new line; panels after a collapsed row go into its `panels`.

  layout(items)::
    local step(s, it) =
      if it.kind == 'row' then
        local y = if s.x != 0 then s.y + s.rowH else s.y;
        local row = {
          id: s.id,
          type: 'row',
          title: it.title,
          collapsed: it.collapsed,
          gridPos: { x: 0, y: y, w: 24, h: 1 },
          panels: [],
        };
        local out = s.out + (if s.pending != null then [s.pending] else []);
        s {
          out: if it.collapsed then out else out + [row],
          pending: if it.collapsed then row else null,
          id: s.id + 1,
          x: 0,
          y: y + 1,
          rowH: 0,
        }
      else
        local wrap = s.x + it.w > 24;
        local x = if wrap then 0 else s.x;
        local y = if wrap then s.y + s.rowH else s.y;
        local rowH = if wrap then 0 else s.rowH;
        local p = it.panel { id: s.id, gridPos: { x: x, y: y, w: it.w, h: it.h } };
        s {
          out: if s.pending == null then s.out + [p] else s.out,
          pending: if s.pending == null then null else s.pending { panels+: [p] },
          id: s.id + 1,
          x: x + it.w,
          y: y,
          rowH: std.max(rowH, it.h),
        };
    local end = std.foldl(step, items, { out: [], pending: null, id: 1, x: 0, y: 0, rowH: 0 });
    end.out + (if end.pending != null then [end.pending] else []),

  // ---------------------------------------------------------------------------------------
  // Variables and the dashboard.

  queryVar(name, label, query, multi, includeAll, sort=1):: {
    name: name,
    label: label,
    type: 'query',
    datasource: lib.DS,
    definition: query,
    query: { query: query, refId: 'PrometheusVariableQueryEditor-VariableQuery', qryType: 1 },
    refresh: 2,
    multi: multi,
    includeAll: includeAll,
    allValue: if includeAll then '.*' else null,
    current: {},
    options: [],
    sort: sort,
    regex: '',
    hide: 0,
  },

  variables(fleet):: {
    list: [
      {
        name: 'datasource',
        label: 'Data source',
        type: 'datasource',
        query: 'prometheus',
        current: {},
        hide: 0,
        includeAll: false,
        multi: false,
        options: [],
        refresh: 1,
        regex: '',
      },
    ] + (
      if multi then [
        // One cluster at a time: the joins match on instance, which two clusters may share.
        lib.queryVar(
          'cluster',
          'Cluster',
          'label_values(railscope_collector_success{' + config.railscopeSelector + '}, ' + config.clusterLabel + ')',
          false,
          false,
        ),
      ] else []
    ) + [
      lib.queryVar(
        'job',
        'Job',
        // Only the scrape jobs of railscope agents.
        'label_values(railscope_collector_success{' + lib.matchers([lib.clusterMatcher, config.railscopeSelector]) + '}, job)',
        true,
        false,
      ),
      lib.queryVar(
        'instance',
        'Node',
        'label_values(railscope_collector_success{' + lib.matchers([lib.clusterMatcher, 'job=~"$job"']) + '}, instance)',
        fleet,
        fleet,
      ),
      lib.queryVar('rail', 'Rail', 'label_values(railscope_rail_info{' + lib.S + '}, rail)', true, true, sort=3),
      // Workloads (the `workload` source): pods by name from the kubelet, and Slurm jobs,
      // systemd units, login sessions and pods by UID from the process scan. A Grafana query
      // variable cannot take the union of two series, so there are two; they narrow only the
      // workload panels, and "All" (`.*`) matches every row, pods of nodes without a kubelet
      // and processes outside any unit (an empty `workload`) included.
      lib.queryVar('pod', 'Pod', 'label_values(railscope_workload_device_info{' + lib.S + '}, pod)', true, true),
      lib.queryVar('workload',
                   'Job or unit',
                   'label_values(railscope_workload_process_device_info{' + lib.S + '}, workload)',
                   true,
                   true),
    ],
  },

  dashboard(uid, title, desc, items, fleet, runbooks):: {
    uid: uid,
    title: title,
    description: desc,
    tags: config.dashboardTags,
    timezone: config.dashboardTimezone,
    editable: true,
    graphTooltip: 1,
    schemaVersion: 39,
    version: 1,
    refresh: config.dashboardRefresh,
    time: { from: 'now-6h', to: 'now' },
    timepicker: {},
    fiscalYearStartMonth: 0,
    liveNow: false,
    weekStart: '',
    annotations: {
      list: [
        {
          builtIn: 1,
          datasource: { type: 'grafana', uid: '-- Grafana --' },
          enable: true,
          hide: true,
          iconColor: 'rgba(0, 211, 255, 1)',
          name: 'Annotations & Alerts',
          type: 'dashboard',
        },
        {
          name: 'railscope alerts',
          datasource: lib.DS,
          enable: true,
          hide: false,
          iconColor: 'red',
          expr: 'ALERTS{' + lib.matchers([
            'alertname=~"Railscope.*"',
            'alertstate="firing"',
            lib.clusterMatcher,
            'instance=~"$instance"',
          ]) + '}',
          titleFormat: '{{alertname}}',
          textFormat: '{{instance}} {{device}} {{port}} {{gpu}}',
          step: '1m',
          useValueForTime: false,
        },
      ],
    },
    // The other railscope dashboards, found by their tags.
    links: [{
      title: 'railscope',
      type: 'dashboards',
      tags: config.dashboardTags,
      asDropdown: false,
      includeVars: true,
      keepTime: true,
      targetBlank: false,
      icon: 'external link',
      tooltip: '',
      url: '',
    }],
    templating: lib.variables(fleet),
    panels: lib.layout(lib.withRunbooks(items, runbooks)),
  },
}
