// mlpbench: defaults and legends for ASV's dashboard (asv 0.6.6). Loaded after ASV's scripts;
// mlpbench/asv_dashboard.py copies it into the published folder.
'use strict';

(function ($) {
    // A graph opened from a bare link shows these values of its parameters, where it has them:
    // bf16 is the suite's headline precision.
    var PREFERRED = {dtype: 'bf16'};
    // and a y-axis zoomed to the data: from zero, close timings draw as one flat line.
    var Y_AXIS = 'zoom';
    var MAX_VALUE = 24;  // legend characters per value

    function defaults_for(index, name) {
        var bm = index.benchmarks && index.benchmarks[name];
        if (!bm) {
            return null;
        }
        var params = {'y-axis-scale': [Y_AXIS]};
        $.each(bm.param_names || [], function (i, pname) {
            if (PREFERRED[pname] === undefined) {
                return;
            }
            // the preferred value where some graph has a point for it, else the first that has one
            var have = (bm.mlpbench_data && bm.mlpbench_data[pname]) || bm.params[i];
            $.each(have, function (j, value) {
                if ($.asv.convert_benchmark_param_value(value) === PREFERRED[pname]) {
                    params['p-' + pname] = [value];
                }
            });
            if (!params['p-' + pname] && have.length && have.length < bm.params[i].length) {
                params['p-' + pname] = [have[0]];
            }
        });
        return params;
    }

    // Only a hash without '?' gets defaults: it comes from a link or a typed URL, while every
    // choice made in ASV's sidebar writes one with '?', which is left as the user set it.
    function apply_defaults(index) {
        var hash = window.location.hash;
        if (!$.asv || !index || hash.indexOf('?') !== -1) {
            return;
        }
        var info = $.asv.parse_hash_string(hash);
        var params = defaults_for(index, info.location.join('/'));
        if (params) {
            history.replaceState(null, '', $.asv.format_hash_string({location: info.location.join('/'), params: params}));
        }
    }

    // Runs before ASV's own handlers: ASV binds its hashchange handler, and reads the first hash,
    // only once index.json has loaded (a prefilter's done callback precedes the caller's).
    window.addEventListener('hashchange', function () {
        apply_defaults($.asv && $.asv.main_json);
    });
    $.ajaxPrefilter(function (options, original, jqXHR) {
        if (/^index\.json(\?|$)/.test(original.url || '')) {
            jqXHR.done(apply_defaults);
        }
    });

    // ASV labels a series "key-value; key-value; ...": keep the parts that differ between the
    // drawn series, a benchmark parameter as its value alone, a machine parameter as "key value".
    function shorten(part, keys, bench_keys) {
        for (var i = 0; i < keys.length; ++i) {
            if (part.lastIndexOf(keys[i] + '-', 0) === 0) {
                var value = part.slice(keys[i].length + 1);
                if (value.length > MAX_VALUE) {
                    value = value.slice(0, MAX_VALUE - 1) + '\u2026';
                }
                return bench_keys.indexOf(keys[i]) !== -1 ? value : keys[i] + ' ' + value;
            }
        }
        return part;
    }

    function short_labels(series) {
        var index = $.asv.main_json;
        var bm = index.benchmarks[$.asv.parse_hash_string(window.location.hash).location.join('/')] || {};
        var bench_keys = (bm.param_names || []).concat(['commit']);
        // longest key first, so that a key that begins another is not taken for it
        var keys = Object.keys(index.params || {}).concat(bench_keys).sort(function (a, b) {
            return b.length - a.length;
        });
        var parts = series.map(function (s) {
            return s.label ? String(s.label).split('; ') : [];
        });
        return parts.map(function (own) {
            return own.filter(function (p) {
                return !parts.every(function (other) { return other.indexOf(p) !== -1; });
            }).map(function (p) { return shorten(p, keys, bench_keys); }).join(' \u00b7 ');
        });
    }

    var plot = $.plot;
    $.plot = function (placeholder, data, options) {
        if ($(placeholder).is('#main-graph') && $.asv && $.asv.main_json.benchmarks && data && data.length) {
            var labels = short_labels(data);
            data = data.map(function (s, i) { return $.extend({}, s, {label: labels[i]}); });
        } else if ($(placeholder).is('.benchmark-plot')) {
            // A grid tile draws lines only, so a history of one commit left it empty; its y-axis
            // ended at the data, so the line hid in the frame.
            options = $.extend(true, {}, options, {series: {points: {show: true, radius: 1.5}},
                                                   yaxis: {autoscaleMargin: 0.2}});
        }
        return plot(placeholder, data, options);
    };
    $.extend($.plot, plot);
})(jQuery);
