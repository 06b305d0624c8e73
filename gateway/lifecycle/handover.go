package lifecycle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The outcomes of `ferrofed audit drain`, as its exit, its output and its termination
// message name them (docs/audit-spool.md, "Hand-over").
const (
	// HandOverEmpty: every spool it opened is empty; the claim may be deleted.
	HandOverEmpty = "empty"
	// HandOverTimeout: --timeout passed with records still undelivered; none deleted.
	HandOverTimeout = "timeout"
	// HandOverFailed: a spool could not be opened or read (held by another process,
	// a configuration without a spool, a disk error); nothing was delivered from it.
	HandOverFailed = "failed"
)

// HandOverExitQuarantine is the exit status of `ferrofed audit drain` when everything
// deliverable was delivered and only quarantined entries are left (outcome
// HandOverFailed): no later run can deliver them. The operator reads it from a hand-over
// Job's terminated container to tell it from another failure (docs/audit-spool.md,
// "Hand-over").
const HandOverExitQuarantine = 5

// HandOverMessage is what `ferrofed audit drain` writes, as one line, to its container's
// termination message file when it ends, and what the operator reads back from a
// hand-over Job's pod to say where records wait (status.audit):
//
//	{"v":1,"kind":"audit-drain","outcome":"empty","delivered":42,
//	 "audit":[{"destination":"repository","records":0,"bytes":0}]}
//
// (one line; broken here to be read).
type HandOverMessage struct {
	// Outcome is HandOverEmpty, HandOverTimeout or HandOverFailed.
	Outcome string
	// Delivered is how many records this run delivered (quarantined ones are not
	// counted: they stay in the spool's quarantine, which is part of Left).
	Delivered int64
	// Left is what each spool still holds.
	Left []SpoolLeft
}

// HandOverKind tells a hand-over's message from a drain's.
const HandOverKind = "audit-drain"

type wireHandOver struct {
	V         *int        `json:"v"`
	Kind      *string     `json:"kind"`
	Outcome   *string     `json:"outcome"`
	Delivered *int64      `json:"delivered"`
	Audit     []SpoolLeft `json:"audit"`
}

// Marshal is the message as one line of JSON, without the newline.
func (m HandOverMessage) Marshal() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	v, kind, outcome, delivered := TerminationMessageVersion, HandOverKind, m.Outcome, m.Delivered
	left := m.Left
	if left == nil {
		left = []SpoolLeft{}
	}
	return encode(wireHandOver{V: &v, Kind: &kind, Outcome: &outcome, Delivered: &delivered, Audit: left})
}

// ParseHandOverMessage reads a message as Marshal writes it, and refuses anything else
// (more than MaxTerminationMessageBytes, another version or kind, a missing field, an
// unknown outcome, a negative count, an outcome "empty" with records left).
func ParseHandOverMessage(data []byte) (HandOverMessage, error) {
	if len(data) > MaxTerminationMessageBytes {
		return HandOverMessage{}, fmt.Errorf("hand-over message: %d bytes, more than %d", len(data), MaxTerminationMessageBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace(data)))
	var w wireHandOver
	if err := dec.Decode(&w); err != nil {
		return HandOverMessage{}, fmt.Errorf("hand-over message: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return HandOverMessage{}, errors.New("hand-over message: more than one JSON value")
	}
	switch {
	case w.V == nil || *w.V != TerminationMessageVersion:
		return HandOverMessage{}, fmt.Errorf("hand-over message: no version %d", TerminationMessageVersion)
	case w.Kind == nil || *w.Kind != HandOverKind:
		return HandOverMessage{}, fmt.Errorf("hand-over message: kind is not %q", HandOverKind)
	case w.Outcome == nil:
		return HandOverMessage{}, errors.New(`hand-over message: no "outcome"`)
	case w.Delivered == nil:
		return HandOverMessage{}, errors.New(`hand-over message: no "delivered"`)
	case w.Audit == nil:
		return HandOverMessage{}, errors.New(`hand-over message: no "audit"`)
	}
	m := HandOverMessage{Outcome: *w.Outcome, Delivered: *w.Delivered, Left: w.Audit}
	if err := m.validate(); err != nil {
		return HandOverMessage{}, err
	}
	return m, nil
}

func (m HandOverMessage) validate() error {
	switch m.Outcome {
	case HandOverEmpty, HandOverTimeout, HandOverFailed:
	default:
		return fmt.Errorf("hand-over message: outcome %q is not %q, %q or %q", m.Outcome, HandOverEmpty, HandOverTimeout, HandOverFailed)
	}
	if m.Delivered < 0 {
		return fmt.Errorf("hand-over message: delivered is negative (%d)", m.Delivered)
	}
	if err := validateSpools("hand-over message: audit", m.Left); err != nil {
		return err
	}
	if m.Outcome == HandOverEmpty {
		for _, sp := range m.Left {
			if sp.Records > 0 {
				return fmt.Errorf("hand-over message: outcome %q with %d records left in %s", HandOverEmpty, sp.Records, sp.Destination)
			}
		}
	}
	return nil
}

// Undelivered sums the records and bytes a list of spools holds.
func Undelivered(spools []SpoolLeft) (records, size int64) {
	for _, sp := range spools {
		records += sp.Records
		size += sp.Bytes
	}
	return records, size
}
