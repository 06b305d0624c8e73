package lifecycle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// The drain's outcomes, as the termination message, the log and ferrofed_drain_total
// name them. A container killed before its drain ended writes no message: "killed" is
// what its reader makes of that, never a value written here.
const (
	// DrainCompleted: every in-flight request finished within the shutdown timeout.
	DrainCompleted = "completed"
	// DrainCut: the shutdown timeout passed and the connections still open were closed.
	DrainCut = "cut"
)

// TerminationMessageVersion is the "v" of the termination message this package writes
// and the only one Parse reads. A field may be added without changing it (a reader
// ignores fields it does not know); a field changing its meaning or going away changes it.
const TerminationMessageVersion = 1

// MaxTerminationMessageBytes is what Kubernetes keeps of a container's termination
// message file (4096 bytes). Marshal's line and its newline fit within it.
const MaxTerminationMessageBytes = 4096

// DrainSteps are the durations of the drain's four steps, each from the signal that
// ends the step before it (SignalShutdownInitiated for the first) to the signal that
// ends it, so that they add up to the whole drain.
type DrainSteps struct {
	// DrainDelay is step 1, up to SignalDrainDelayElapsed.
	DrainDelay time.Duration
	// ListenerClosed is step 2, up to SignalListenerClosed.
	ListenerClosed time.Duration
	// InFlight is step 3, up to SignalInFlightDrained.
	InFlight time.Duration
	// Bindings is step 4, up to SignalBindingsStopped.
	Bindings time.Duration
}

// TerminationMessage is what a gateway writes, as one line, to its container's
// termination message file (server.termination_message_path) at the end of its drain,
// after step 4 and before the metrics push; the kubelet copies it into the pod's status
// (containerStatuses[].state.terminated.message), where the operator reads it back with
// ParseTerminationMessage.
//
// On the wire it is compact JSON, every field always present, durations in whole
// milliseconds (truncated):
//
//	{"v":1,"outcome":"completed","drainMs":5012,
//	 "steps":{"drainDelayMs":5000,"listenerClosedMs":0,"inFlightMs":11,"bindingsMs":1},
//	 "cutConnections":0,"abandoned":[],"abandonedOmitted":0}
//
// (one line; broken here to be read). abandonedOmitted counts the names Marshal left
// off the end of abandoned to keep the line within MaxTerminationMessageBytes.
type TerminationMessage struct {
	// Outcome is DrainCompleted or DrainCut.
	Outcome string
	// Drain is the whole drain, from SignalShutdownInitiated to SignalBindingsStopped:
	// at least the sum of Steps.
	Drain time.Duration
	Steps DrainSteps
	// CutConnections is how many connections step 3 closed (0 when completed).
	CutConnections int
	// Abandoned names the bindings step 4 abandoned, in the order the gateway has them.
	Abandoned []string
	// AbandonedOmitted is how many more were abandoned than Abandoned names.
	AbandonedOmitted int
	// Audit is what each audit spool still held, undelivered, when step 4 closed it
	// (one entry per spool the gateway had; none without [audit]). A message written
	// before the field existed parses with Audit nil: not reported.
	Audit []SpoolLeft
}

// SpoolLeft is what one audit spool held, undelivered, when it was closed: what a
// persistent spool keeps for the next start or a hand-over (docs/audit-spool.md).
type SpoolLeft struct {
	// Destination is the spool's destination: "repository" or "feed".
	Destination string `json:"destination"`
	// Records and Bytes are its undelivered records and their bytes on disk.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
}

// MaxSpoolsReported bounds Audit (and a hand-over's Left): a gateway has at most two
// spools; the bound keeps a hostile message small.
const MaxSpoolsReported = 8

// validateSpools holds the rules of a list of SpoolLeft.
func validateSpools(field string, spools []SpoolLeft) error {
	if len(spools) > MaxSpoolsReported {
		return fmt.Errorf("%s: %d spools, more than %d", field, len(spools), MaxSpoolsReported)
	}
	for i, sp := range spools {
		switch {
		case sp.Destination == "" || len(sp.Destination) > 32:
			return fmt.Errorf("%s[%d].destination must be 1 to 32 bytes", field, i)
		case sp.Records < 0 || sp.Bytes < 0:
			return fmt.Errorf("%s[%d] (%s): a negative count (%d records, %d bytes)", field, i, sp.Destination, sp.Records, sp.Bytes)
		case sp.Records > 0 && sp.Bytes == 0:
			return fmt.Errorf("%s[%d] (%s): %d records in 0 bytes", field, i, sp.Destination, sp.Records)
		}
	}
	return nil
}

// wireMessage is TerminationMessage as JSON. Pointers tell a missing field from a zero.
type wireMessage struct {
	V                *int        `json:"v"`
	Outcome          *string     `json:"outcome"`
	DrainMS          *int64      `json:"drainMs"`
	Steps            *wireSteps  `json:"steps"`
	CutConnections   *int        `json:"cutConnections"`
	Abandoned        *[]string   `json:"abandoned"`
	AbandonedOmitted *int        `json:"abandonedOmitted"`
	Audit            []SpoolLeft `json:"audit,omitempty"`
}

type wireSteps struct {
	DrainDelayMS     *int64 `json:"drainDelayMs"`
	ListenerClosedMS *int64 `json:"listenerClosedMs"`
	InFlightMS       *int64 `json:"inFlightMs"`
	BindingsMS       *int64 `json:"bindingsMs"`
}

// maxMS is the longest duration, in milliseconds, a time.Duration holds.
const maxMS = math.MaxInt64 / int64(time.Millisecond)

// Marshal is the message as one line of JSON, without the newline, at most
// MaxTerminationMessageBytes−1 bytes: when the abandoned names do not all fit, it keeps
// as many of the first as fit and adds the others to abandonedOmitted. A message that
// ParseTerminationMessage would refuse (an unknown outcome, a negative duration, steps
// longer than the drain, ...) is an error.
func (m TerminationMessage) Marshal() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	v, outcome, cut := TerminationMessageVersion, m.Outcome, m.CutConnections
	abandoned := []string{}
	// Every name left out is counted now, so that the count's digits are the most the
	// final line can need.
	omitted := m.AbandonedOmitted + len(m.Abandoned)
	w := wireMessage{
		V: &v, Outcome: &outcome, DrainMS: ms(m.Drain),
		Steps: &wireSteps{DrainDelayMS: ms(m.Steps.DrainDelay), ListenerClosedMS: ms(m.Steps.ListenerClosed),
			InFlightMS: ms(m.Steps.InFlight), BindingsMS: ms(m.Steps.Bindings)},
		CutConnections: &cut, Abandoned: &abandoned, AbandonedOmitted: &omitted, Audit: m.Audit,
	}
	line, err := encode(w)
	if err != nil {
		return nil, err
	}
	room := MaxTerminationMessageBytes - 1 - len(line)
	for _, name := range m.Abandoned {
		quoted, err := encode(name)
		if err != nil {
			return nil, err
		}
		n := len(quoted)
		if len(abandoned) > 0 {
			n++ // the comma
		}
		if n > room {
			break
		}
		room -= n
		abandoned = append(abandoned, name)
	}
	omitted = m.AbandonedOmitted + len(m.Abandoned) - len(abandoned)
	return encode(w)
}

// encode is compact JSON without HTML escaping ('<' stays one byte) and without the
// encoder's newline.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("termination message: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ParseTerminationMessage reads a termination message as Marshal writes it (surrounding
// white space, such as the line's newline, aside). It refuses anything else: more than
// MaxTerminationMessageBytes, not one JSON object, another version, a missing field, an
// unknown outcome, a negative or overflowing number, steps that add up to more than the
// drain, cut connections with outcome completed, an empty binding name.
func ParseTerminationMessage(data []byte) (TerminationMessage, error) {
	if len(data) > MaxTerminationMessageBytes {
		return TerminationMessage{}, fmt.Errorf("termination message: %d bytes, more than %d", len(data), MaxTerminationMessageBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace(data)))
	var w wireMessage
	if err := dec.Decode(&w); err != nil {
		return TerminationMessage{}, fmt.Errorf("termination message: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return TerminationMessage{}, errors.New("termination message: more than one JSON value")
	}
	missing := func(field string) (TerminationMessage, error) {
		return TerminationMessage{}, fmt.Errorf("termination message: no %q", field)
	}
	switch {
	case w.V == nil:
		return missing("v")
	case *w.V != TerminationMessageVersion:
		return TerminationMessage{}, fmt.Errorf("termination message: version %d, want %d", *w.V, TerminationMessageVersion)
	case w.Outcome == nil:
		return missing("outcome")
	case w.DrainMS == nil:
		return missing("drainMs")
	case w.Steps == nil:
		return missing("steps")
	case w.Steps.DrainDelayMS == nil:
		return missing("steps.drainDelayMs")
	case w.Steps.ListenerClosedMS == nil:
		return missing("steps.listenerClosedMs")
	case w.Steps.InFlightMS == nil:
		return missing("steps.inFlightMs")
	case w.Steps.BindingsMS == nil:
		return missing("steps.bindingsMs")
	case w.CutConnections == nil:
		return missing("cutConnections")
	case w.Abandoned == nil:
		return missing("abandoned")
	case w.AbandonedOmitted == nil:
		return missing("abandonedOmitted")
	}
	var bad error
	dur := func(field string, v int64) time.Duration {
		if (v < 0 || v > maxMS) && bad == nil {
			bad = fmt.Errorf("termination message: %s is %d, not from 0 to %d", field, v, maxMS)
		}
		return time.Duration(v) * time.Millisecond
	}
	m := TerminationMessage{
		Outcome: *w.Outcome,
		Drain:   dur("drainMs", *w.DrainMS),
		Steps: DrainSteps{
			DrainDelay:     dur("steps.drainDelayMs", *w.Steps.DrainDelayMS),
			ListenerClosed: dur("steps.listenerClosedMs", *w.Steps.ListenerClosedMS),
			InFlight:       dur("steps.inFlightMs", *w.Steps.InFlightMS),
			Bindings:       dur("steps.bindingsMs", *w.Steps.BindingsMS),
		},
		CutConnections:   *w.CutConnections,
		Abandoned:        *w.Abandoned,
		AbandonedOmitted: *w.AbandonedOmitted,
		Audit:            w.Audit,
	}
	if bad != nil {
		return TerminationMessage{}, bad
	}
	if err := m.validate(); err != nil {
		return TerminationMessage{}, err
	}
	return m, nil
}

// validate holds the rules Marshal and ParseTerminationMessage share.
func (m TerminationMessage) validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("termination message: "+format, args...)
	}
	if m.Outcome != DrainCompleted && m.Outcome != DrainCut {
		return fail("outcome %q is not %q or %q", m.Outcome, DrainCompleted, DrainCut)
	}
	steps := []struct {
		name string
		d    time.Duration
	}{
		{"drain", m.Drain}, {"steps.drainDelay", m.Steps.DrainDelay}, {"steps.listenerClosed", m.Steps.ListenerClosed},
		{"steps.inFlight", m.Steps.InFlight}, {"steps.bindings", m.Steps.Bindings},
	}
	var sum int64 // in milliseconds, as on the wire: each step truncated, as the drain is
	for i, s := range steps {
		if s.d < 0 {
			return fail("%s is negative (%s)", s.name, s.d)
		}
		if i > 0 {
			sum += s.d.Milliseconds()
		}
	}
	// Four steps of at most maxMS each cannot overflow an int64.
	if sum > m.Drain.Milliseconds() {
		return fail("the steps add up to %d ms, more than the drain's %d ms", sum, m.Drain.Milliseconds())
	}
	switch {
	case m.CutConnections < 0:
		return fail("cutConnections is negative (%d)", m.CutConnections)
	case m.CutConnections > 0 && m.Outcome == DrainCompleted:
		return fail("%d cut connections with outcome %q", m.CutConnections, DrainCompleted)
	case m.AbandonedOmitted < 0 || m.AbandonedOmitted > math.MaxInt32:
		return fail("abandonedOmitted is %d, not from 0 to %d", m.AbandonedOmitted, math.MaxInt32)
	case len(m.Abandoned) > math.MaxInt32-m.AbandonedOmitted:
		return fail("more than %d abandoned bindings", math.MaxInt32)
	}
	for i, name := range m.Abandoned {
		if name == "" {
			return fail("abandoned[%d] is empty", i)
		}
	}
	if err := validateSpools("audit", m.Audit); err != nil {
		return fail("%w", err)
	}
	return nil
}
