package dependencies

import (
	"github.com/prometheus/client_golang/prometheus"
)

// MetricName is the gauge the tracker exports.
const MetricName = "ferrofed_dependency_state"

// MemberDependency is the value of the `dependency` label for member endpoints; a
// binding uses its report key ("resolver", "consent", ...) with an empty endpoint.
const MemberDependency = "member"

var stateDesc = prometheus.NewDesc(
	MetricName,
	"Last observed state of a dependency: 1 for its current state, 0 for the others.",
	[]string{"dependency", "endpoint", "state"}, nil,
)

// Collector returns a prometheus.Collector that exports the tracker at scrape time:
// one series per dependency and state, 1 for the current state and 0 for the others,
// so that `ferrofed_dependency_state{state="down"} == 1` alerts and a state change
// never leaves a stale series behind. Register it once; it reads the live tracker.
func (t *Tracker) Collector() prometheus.Collector { return collector{t} }

type collector struct{ t *Tracker }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- stateDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	r := c.t.Report()
	emit := func(dependency, endpoint string, current State) {
		for _, s := range States {
			v := 0.0
			if s == current {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, dependency, endpoint, string(s))
		}
	}
	for id, s := range r.Endpoints {
		emit(MemberDependency, id, s)
	}
	for name, s := range r.Services {
		emit(name, "", s)
	}
}
