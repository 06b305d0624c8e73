package lifecycle

// Phase is where a gateway process is in its life; readiness names it.
type Phase string

const (
	// PhaseBooting is from start until every readiness check first passed.
	PhaseBooting Phase = "booting"
	// PhaseServing is the steady state.
	PhaseServing Phase = "serving"
	// PhaseDraining is from SIGTERM/SIGINT to exit.
	PhaseDraining Phase = "draining"
)

// Signal names one step of the four-step drain, in the order they fire.
type Signal string

const (
	// SignalShutdownInitiated fires when SIGTERM/SIGINT arrived: readiness is 503 from now.
	SignalShutdownInitiated Signal = "ShutdownInitiated"
	// SignalDrainDelayElapsed fires when drain_delay_ms has passed (step 1 done).
	SignalDrainDelayElapsed Signal = "DrainDelayElapsed"
	// SignalListenerClosed fires when the listener stopped accepting (step 2).
	SignalListenerClosed Signal = "ListenerClosed"
	// SignalInFlightDrained fires when in-flight requests finished or were cut (step 3).
	SignalInFlightDrained Signal = "InFlightDrained"
	// SignalBindingsStopped fires when the bindings stopped or were abandoned (step 4).
	SignalBindingsStopped Signal = "BindingsStopped"
)

// DrainSignals are the drain's signals in the order they must fire.
var DrainSignals = []Signal{
	SignalShutdownInitiated,
	SignalDrainDelayElapsed,
	SignalListenerClosed,
	SignalInFlightDrained,
	SignalBindingsStopped,
}
