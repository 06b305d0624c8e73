package lifecycle

import (
	"strings"
	"testing"
	"time"
)

func dur(d time.Duration) *time.Duration { return &d }
func secs(s int64) *int64                { return &s }

func TestPlanAppliesDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Budgets
		want Plan
	}{
		{"nothing set takes every default, and nothing polls: no delay", Budgets{}, Plan{
			RequestTimeout: 30 * time.Second, ShutdownTimeout: 30 * time.Second,
			BindingsDrainTimeout: 5 * time.Second, TerminationHeadroom: 5 * time.Second,
			GracePeriodSeconds: 40, DrainDelayFromPoll: true}},
		{"an unset drain delay is one readiness poll", Budgets{ReadinessPoll: 10 * time.Second}, Plan{
			RequestTimeout: 30 * time.Second, DrainDelay: 10 * time.Second, ShutdownTimeout: 30 * time.Second,
			BindingsDrainTimeout: 5 * time.Second, TerminationHeadroom: 5 * time.Second,
			GracePeriodSeconds: 50, DrainDelayFromPoll: true, ReadinessPoll: 10 * time.Second}},
		{"a set drain delay wins over the poll", Budgets{DrainDelay: dur(2 * time.Second), ReadinessPoll: 10 * time.Second}, Plan{
			RequestTimeout: 30 * time.Second, DrainDelay: 2 * time.Second, ShutdownTimeout: 30 * time.Second,
			BindingsDrainTimeout: 5 * time.Second, TerminationHeadroom: 5 * time.Second,
			GracePeriodSeconds: 42, ReadinessPoll: 10 * time.Second}},
		{"an unset shutdown timeout follows the request timeout", Budgets{RequestTimeout: dur(12 * time.Second), DrainDelay: dur(0)}, Plan{
			RequestTimeout: 12 * time.Second, ShutdownTimeout: 12 * time.Second,
			BindingsDrainTimeout: 5 * time.Second, TerminationHeadroom: 5 * time.Second, GracePeriodSeconds: 22}},
		{"set values win", Budgets{RequestTimeout: dur(time.Second), DrainDelay: dur(2 * time.Second), ShutdownTimeout: dur(3 * time.Second),
			BindingsDrainTimeout: dur(0), TerminationHeadroom: dur(0)}, Plan{
			RequestTimeout: time.Second, DrainDelay: 2 * time.Second, ShutdownTimeout: 3 * time.Second, GracePeriodSeconds: 5}},
		{"an explicit grace period is kept as set", Budgets{DrainDelay: dur(0), TerminationGracePeriodSeconds: secs(120)}, Plan{
			RequestTimeout: 30 * time.Second, ShutdownTimeout: 30 * time.Second,
			BindingsDrainTimeout: 5 * time.Second, TerminationHeadroom: 5 * time.Second,
			GracePeriodSeconds: 120, GracePeriodExplicit: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Plan(); got != tt.want {
				t.Fatalf("Plan() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGracePeriodIsTheCeilingOfDrainPlusHeadroom(t *testing.T) {
	tests := []struct {
		name string
		in   Budgets
		want int64
	}{
		{"defaults: 0 + 30 + 5 + 5", Budgets{}, 40},
		{"defaults under a 10s readiness poll: 10 + 30 + 5 + 5", Budgets{ReadinessPoll: 10 * time.Second}, 50},
		{"fractions round up", Budgets{DrainDelay: dur(1500 * time.Millisecond), RequestTimeout: dur(time.Second),
			BindingsDrainTimeout: dur(0), TerminationHeadroom: dur(1 * time.Millisecond)}, 3},
		{"exact seconds do not round up", Budgets{DrainDelay: dur(10 * time.Second), RequestTimeout: dur(20 * time.Second),
			ShutdownTimeout: dur(25 * time.Second), BindingsDrainTimeout: dur(5 * time.Second)}, 45},
		{"an explicit value replaces the derived one", Budgets{TerminationGracePeriodSeconds: secs(120)}, 120},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Plan().GracePeriodSeconds; got != tt.want {
				t.Fatalf("GracePeriodSeconds = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestValidateNamesEveryFieldInvolved(t *testing.T) {
	tests := []struct {
		name string
		in   Budgets
		// want holds, per expected problem, the substrings its text must contain.
		want [][]string
	}{
		{"defaults fit", Budgets{}, nil},
		{"shutdown equal to request fits", Budgets{RequestTimeout: dur(time.Second), ShutdownTimeout: dur(time.Second)}, nil},
		{"shutdown shorter than request is refused naming both keys",
			Budgets{RequestTimeout: dur(2 * time.Second), ShutdownTimeout: dur(time.Second)},
			[][]string{{"server.shutdown_timeout_ms", "server.request_timeout_ms", "1s", "2s"}}},
		{"shutdown shorter than the default request timeout is refused",
			Budgets{ShutdownTimeout: dur(10 * time.Second)},
			[][]string{{"server.shutdown_timeout_ms", "server.request_timeout_ms"}}},
		{"a zero request timeout is refused", Budgets{RequestTimeout: dur(0)},
			[][]string{{"server.request_timeout_ms", "greater than zero"}}},
		{"negative budgets are refused one by one",
			Budgets{DrainDelay: dur(-1), BindingsDrainTimeout: dur(-time.Second)},
			[][]string{{"server.drain_delay_ms", "negative"}, {"server.bindings_drain_timeout_ms", "negative"}}},
		{"a budget over an hour is refused", Budgets{DrainDelay: dur(time.Hour + time.Millisecond)},
			[][]string{{"server.drain_delay_ms", "at most 1h0m0s"}}},
		{"an hour exactly fits", Budgets{RequestTimeout: dur(time.Hour)}, nil},
		{"an explicit grace period equal to the drain is refused",
			Budgets{TerminationGracePeriodSeconds: secs(35)},
			[][]string{{"server.termination_grace_period_seconds", "server.drain_delay_ms", "server.shutdown_timeout_ms", "server.bindings_drain_timeout_ms", "35s"}}},
		{"an explicit grace period one second past the drain fits", Budgets{TerminationGracePeriodSeconds: secs(36)}, nil},
		{"a grace period past what a Duration holds fits and does not wrap", Budgets{TerminationGracePeriodSeconds: secs(1 << 62)}, nil},
		{"a negative grace period is refused", Budgets{TerminationGracePeriodSeconds: secs(-1)},
			[][]string{{"server.termination_grace_period_seconds", "negative"}}},
		{"an explicit grace period must outlast a drain delay taken from the poll",
			Budgets{ReadinessPoll: 10 * time.Second, TerminationGracePeriodSeconds: secs(45)},
			[][]string{{"server.termination_grace_period_seconds", "server.drain_delay_ms", "45s"}}},
		{"a derived grace period with no headroom on a whole-second drain is refused on the headroom",
			Budgets{TerminationHeadroom: dur(0)},
			[][]string{{"termination headroom (0s)", "server.drain_delay_ms", "server.shutdown_timeout_ms", "server.bindings_drain_timeout_ms", "= 35s", "(35s)"}}},
		{"a derived grace period with no headroom on a fractional drain rounds up and fits",
			Budgets{TerminationHeadroom: dur(0), DrainDelay: dur(500 * time.Millisecond)}, nil},
		{"an explicit grace period makes the headroom irrelevant",
			Budgets{TerminationHeadroom: dur(0), TerminationGracePeriodSeconds: secs(36)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Validate(TOMLFields)
			if len(got) != len(tt.want) {
				t.Fatalf("Validate() = %v, want %d problems", got, len(tt.want))
			}

			for i, subs := range tt.want {
				for _, s := range subs {
					if !strings.Contains(got[i].Error(), s) {
						t.Errorf("problem %d %q does not contain %q", i, got[i].Error(), s)
					}
				}
			}
		})
	}
}

func TestGraceProblemIsReportedOnTheFieldThatFixesIt(t *testing.T) {
	tests := []struct {
		name string
		in   Budgets
		want string
	}{
		{"explicit: on the grace period", Budgets{TerminationGracePeriodSeconds: secs(35)}, TOMLFields.TerminationGracePeriodSeconds},
		{"derived: on the headroom", Budgets{TerminationHeadroom: dur(0)}, TOMLFields.TerminationHeadroom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Validate(TOMLFields)
			if len(got) != 1 || got[0].Field != tt.want {
				t.Fatalf("Validate() = %+v, want one problem on %q", got, tt.want)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		in   Budgets
		want []string
	}{
		{"a delay covering the poll with default headroom warns of nothing", Budgets{DrainDelay: dur(10 * time.Second), ReadinessPoll: 10 * time.Second}, nil},
		{"an unset delay is the poll and warns of nothing", Budgets{ReadinessPoll: 10 * time.Second}, nil},
		{"a delay shorter than the poll warns", Budgets{DrainDelay: dur(5 * time.Second), ReadinessPoll: 10 * time.Second}, []string{"server.drain_delay_ms (5s) is shorter than the readiness poll (10s"}},
		{"headroom under 5s warns", Budgets{TerminationHeadroom: dur(time.Second)}, []string{"termination headroom leaves 1s"}},
		{"an explicit grace period with little room warns", Budgets{TerminationGracePeriodSeconds: secs(36)}, []string{"server.termination_grace_period_seconds leaves 1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Warnings(TOMLFields)
			if len(got) != len(tt.want) {
				t.Fatalf("Warnings() = %q, want %d", got, len(tt.want))
			}
			for i := range tt.want {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("warning %q does not contain %q", got[i], tt.want[i])
				}
			}
		})
	}
}

func TestReadinessPoll(t *testing.T) {
	if got := ReadinessPoll(5, 3); got != 15*time.Second {
		t.Fatalf("ReadinessPoll(5, 3) = %s, want 15s", got)
	}
}
