"""node-problem-detector's custom plugin monitor, as it applies a plugin's results to node conditions
(pkg/custompluginmonitor/custom_plugin_monitor.go): older releases take the results one at a time from
a channel and set a permanent rule's condition from each (True on exit 1, False on exit 0, the rule's
reason; the plugin's line the message); newer ones gather an interval's results and set a condition
True when any of its rules says so. Exit 2 (unknown) changes no condition in either."""

import json
import os

FLEET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fleet")
MONITOR = os.path.join(FLEET, "unbounded-nvidia-monitor.json")


def monitor(path=MONITOR):
    with open(path) as f:
        return json.load(f)


def one_at_a_time(rules, results, conditions):
    """Older NPD: each result, in the rules' order, sets its rule's condition."""
    for rule, rc in zip(rules, results):
        if rc in (0, 1):
            conditions[rule["condition"]] = rc == 1
    return dict(conditions)


def gathered(rules, results, conditions):
    """Newer NPD: a condition is True when any of its rules' results of the interval is."""
    seen = {}
    for rule, rc in zip(rules, results):
        if rc in (0, 1):
            seen[rule["condition"]] = seen.get(rule["condition"], False) or rc == 1
    conditions.update(seen)
    return dict(conditions)


def conditions_over_intervals(rules, results, intervals=3):
    """The conditions an unchanging node shows, under both processings and both orders of the older
    one over `intervals` intervals: (every state the older one passed through, the newer one's last)."""
    old, new = {}, {}
    history = []
    for _ in range(intervals):
        history.append(one_at_a_time(rules, results, old))
        history.append(one_at_a_time(list(reversed(rules)), list(reversed(results)), old))
        last = gathered(rules, results, new)
    return history, last
