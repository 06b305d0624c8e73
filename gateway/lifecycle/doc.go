// Package lifecycle holds the drain budgets of a gateway process, the rules that make
// them fit together, the grace-period formula, and the names of the phases and of the
// drain's signals. It is the one home of these rules: `ferrofed config check`, the
// gateway at start and on reload, the operator's controller and its admission webhook
// all call it. Everything here is pure: no clock, no environment, no I/O.
//
// # The plan
//
// Budgets are what a user set (nil: unset) plus one input, the readiness poll of
// whatever balances the gateway. Budgets.Plan resolves them once:
//
//	drainDelay       = set value, else the readiness poll (periodSeconds × failureThreshold;
//	                   zero for a process nothing polls)
//	shutdownTimeout  = set value, else requestTimeout
//	grace period     = explicit terminationGracePeriodSeconds,
//	                   else ceil(drainDelay + shutdownTimeout + bindingsDrainTimeout + terminationHeadroom)
//
// Budgets.Validate checks the grace period the runtime will really give, explicit or
// derived, and Budgets.Warnings what fits but is likely to drop requests.
//
// # The drain timeline
//
// On SIGTERM or SIGINT, with d = drainDelay, s = shutdownTimeout and b =
// bindingsDrainTimeout (gateway/server's drain runs this, firing each Signal in order,
// each at most once):
//
//	T0              SignalShutdownInitiated  readiness answers 503 (phase draining); the
//	                                         listener keeps accepting and serving, each
//	                                         answer with Connection: close
//	T0+d            SignalDrainDelayElapsed  step 1 done: the balancer has seen the 503
//	T0+d+ε          SignalListenerClosed     step 2: no new connection; keep-alives off
//	≤ T0+d+s        SignalInFlightDrained    step 3: every in-flight request finished
//	                                         (outcome completed), or at T0+d+s the
//	                                         connections still open were cut (outcome cut);
//	                                         an idle gateway gets here at once
//	≤ T0+d+s+b      SignalBindingsStopped    step 4: each binding's process stopped (e.g.
//	                                         the PMIR subscription deleted), or abandoned
//	                                         with a warning naming it
//	then            the outcome written, one line, to server.termination_message_path (TerminationMessage)
//	then            metrics pushed (metrics.push_url), the process exits
//	T0+grace        the runtime's SIGKILL, which the exit must beat: grace > d+s+b, and
//	                the headroom grace − (d+s+b) is what the push and the exit get
//
// # The rules and their CEL mirrors
//
// The Gateway CRD's CEL rules (api/v1alpha1/gateway_types.go) hold with no operator
// running, so each rule here that a Gateway can break has a twin there. Whoever edits a
// rule edits its twin; test/operator's admission table runs one set of cases through
// CEL, the webhook, this package and `config check` and requires them to agree:
//
//	rule here (Budgets.Validate)                 CEL twin (marker on)
//	each budget from 0 to MaxBudget              Lifecycle.<field>: duration(self) >= 0s && <= 1h
//	requestTimeout greater than zero             Lifecycle.RequestTimeout: duration(self) > 0s
//	shutdownTimeout ≥ requestTimeout             Lifecycle: shutdownTimeout >= requestTimeout
//	explicit grace > drain                       GatewaySpec: terminationGracePeriodSeconds * 1000 > drain in ms
//	derived grace > drain (headroom 0 on a       GatewaySpec: terminationHeadroom > 0s || drain in ms % 1000 != 0
//	whole-second drain)
//	unset drainDelay = readiness poll            both GatewaySpec rules spell the drain with
//	                                             has(drainDelay) ? drainDelay : periodSeconds × failureThreshold
//
// Durations being whole milliseconds is a CRD pattern (api/v1alpha1) and an admission
// check (internal/gatewayspec), not a rule of this package: ferrofed.toml cannot express anything else.
package lifecycle
