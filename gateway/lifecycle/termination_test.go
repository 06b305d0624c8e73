package lifecycle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func sampleMessage() TerminationMessage {
	return TerminationMessage{
		Outcome: DrainCut,
		Drain:   5342 * time.Millisecond,
		Steps: DrainSteps{DrainDelay: 5000 * time.Millisecond, ListenerClosed: 1 * time.Millisecond,
			InFlight: 300 * time.Millisecond, Bindings: 40 * time.Millisecond},
		CutConnections: 2,
		Abandoned:      []string{"pmir", "audit"},
	}
}

// The line is the documented format, byte for byte: the operator and anyone reading a
// pod's status parse exactly this.
func TestTerminationMessageFormat(t *testing.T) {
	line, err := sampleMessage().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"outcome":"cut","drainMs":5342,"steps":{"drainDelayMs":5000,"listenerClosedMs":1,"inFlightMs":300,"bindingsMs":40},` +
		`"cutConnections":2,"abandoned":["pmir","audit"],"abandonedOmitted":0}`
	if string(line) != want {
		t.Fatalf("Marshal:\n got %s\nwant %s", line, want)
	}
	empty, err := TerminationMessage{Outcome: DrainCompleted}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":1,"outcome":"completed","drainMs":0,"steps":{"drainDelayMs":0,"listenerClosedMs":0,"inFlightMs":0,"bindingsMs":0},` +
		`"cutConnections":0,"abandoned":[],"abandonedOmitted":0}`; string(empty) != want {
		t.Fatalf("nothing abandoned is an empty list, never null:\n got %s\nwant %s", empty, want)
	}
}

func TestTerminationMessageRoundTrips(t *testing.T) {
	for _, m := range []TerminationMessage{
		sampleMessage(),
		{Outcome: DrainCompleted, Abandoned: []string{}},
		{Outcome: DrainCompleted, Drain: time.Hour, Steps: DrainSteps{DrainDelay: time.Minute, InFlight: 30 * time.Minute}, Abandoned: []string{"<&>", "é\n\"x\""}},
		{Outcome: DrainCut, Drain: 10 * time.Second, Abandoned: []string{"a"}, AbandonedOmitted: 7},
	} {
		line, err := m.Marshal()
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", m, err)
		}
		if bytes.ContainsAny(line, "\n\r") {
			t.Fatalf("not one line: %q", line)
		}
		got, err := ParseTerminationMessage(append(line, '\n')) // as the file holds it
		if err != nil {
			t.Fatalf("Parse(%s): %v", line, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

func TestTerminationMessageDurationsAreTruncatedToMilliseconds(t *testing.T) {
	m := TerminationMessage{Outcome: DrainCompleted, Drain: 1999999 * time.Microsecond,
		Steps: DrainSteps{DrainDelay: 999999 * time.Microsecond, Bindings: 999999 * time.Microsecond}}
	line, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseTerminationMessage(line)
	if err != nil {
		t.Fatalf("steps that fit the drain in nanoseconds must fit it in milliseconds: %v (%s)", err, line)
	}
	if got.Drain != 1999*time.Millisecond || got.Steps.DrainDelay != 999*time.Millisecond {
		t.Fatalf("got %+v", got)
	}
}

// A long abandoned list keeps the line within Kubernetes' 4096 bytes, says how many it
// left out, and still parses.
func TestTerminationMessageTruncatesTheAbandonedList(t *testing.T) {
	var names []string
	for i := range 500 {
		names = append(names, fmt.Sprintf("binding-%03d-%s", i, strings.Repeat("x", 20)))
	}
	m := TerminationMessage{Outcome: DrainCut, Drain: time.Second, CutConnections: 1, Abandoned: names, AbandonedOmitted: 3}
	line, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(line)+1 > MaxTerminationMessageBytes {
		t.Fatalf("line and newline are %d bytes, more than %d", len(line)+1, MaxTerminationMessageBytes)
	}
	got, err := ParseTerminationMessage(line)
	if err != nil {
		t.Fatal(err)
	}
	kept := len(got.Abandoned)
	if kept == 0 || kept == len(names) || !slices.Equal(got.Abandoned, names[:kept]) {
		t.Fatalf("kept %d of %d names, want the first ones, some but not all", kept, len(names))
	}
	if got.AbandonedOmitted != 3+len(names)-kept {
		t.Fatalf("abandonedOmitted %d, want %d", got.AbandonedOmitted, 3+len(names)-kept)
	}
	// Greedy: the next name would not have fitted.
	next, _ := json.Marshal(names[kept])
	if len(line)+1+len(next)+1 <= MaxTerminationMessageBytes {
		t.Fatalf("%d bytes of %d used, yet %q (%d bytes) was left out", len(line)+1, MaxTerminationMessageBytes, names[kept], len(next))
	}

	huge := TerminationMessage{Outcome: DrainCompleted, Abandoned: []string{strings.Repeat("y", 5000), "short"}}
	line, err = huge.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err = ParseTerminationMessage(line)
	if err != nil || len(got.Abandoned) != 0 || got.AbandonedOmitted != 2 {
		t.Fatalf("a first name longer than the limit: %+v, %v (%s)", got, err, line)
	}
}

func TestParseTerminationMessageRefusesGarbage(t *testing.T) {
	valid := func(edit func(map[string]any)) string {
		var m map[string]any
		line, _ := sampleMessage().Marshal()
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		out, _ := json.Marshal(m)
		return string(out)
	}
	steps := func(m map[string]any) map[string]any { return m["steps"].(map[string]any) }
	tests := []struct {
		name, data, words string
	}{
		{"empty", "", "EOF"},
		{"white space", " \n", "EOF"},
		{"plain text", "drained in 5s", "invalid character"},
		{"a JSON array", "[1]", "cannot unmarshal"},
		{"null", "null", `no "v"`},
		{"an empty object", "{}", `no "v"`},
		{"two objects", valid(func(map[string]any) {}) + valid(func(map[string]any) {}), "more than one"},
		{"trailing garbage", valid(func(map[string]any) {}) + " x", "more than one"},
		{"a truncated line", valid(func(map[string]any) {})[:40], "unexpected EOF"},
		{"too long", valid(func(m map[string]any) { m["pad"] = strings.Repeat("z", MaxTerminationMessageBytes) }), "more than 4096"},
		{"another version", valid(func(m map[string]any) { m["v"] = 2 }), "version 2"},
		{"a version as a string", valid(func(m map[string]any) { m["v"] = "1" }), "cannot unmarshal"},
		{"no outcome", valid(func(m map[string]any) { delete(m, "outcome") }), `no "outcome"`},
		{"an unknown outcome", valid(func(m map[string]any) { m["outcome"] = "killed" }), `outcome "killed"`},
		{"no drainMs", valid(func(m map[string]any) { delete(m, "drainMs") }), `no "drainMs"`},
		{"a fractional drainMs", valid(func(m map[string]any) { m["drainMs"] = 1.5 }), "cannot unmarshal"},
		{"a negative drainMs", valid(func(m map[string]any) { m["drainMs"] = -1 }), "drainMs is -1"},
		{"a drainMs beyond a Duration", valid(func(m map[string]any) { m["drainMs"] = int64(1) << 62 }), "not from 0"},
		{"no steps", valid(func(m map[string]any) { delete(m, "steps") }), `no "steps"`},
		{"steps null", valid(func(m map[string]any) { m["steps"] = nil }), `no "steps"`},
		{"no drain delay", valid(func(m map[string]any) { delete(steps(m), "drainDelayMs") }), `no "steps.drainDelayMs"`},
		{"no listener step", valid(func(m map[string]any) { delete(steps(m), "listenerClosedMs") }), `no "steps.listenerClosedMs"`},
		{"no in-flight step", valid(func(m map[string]any) { delete(steps(m), "inFlightMs") }), `no "steps.inFlightMs"`},
		{"no bindings step", valid(func(m map[string]any) { delete(steps(m), "bindingsMs") }), `no "steps.bindingsMs"`},
		{"a negative step", valid(func(m map[string]any) { steps(m)["inFlightMs"] = -3 }), "steps.inFlightMs is -3"},
		{"steps longer than the drain", valid(func(m map[string]any) { m["drainMs"] = 100 }), "more than the drain's 100 ms"},
		{"no cutConnections", valid(func(m map[string]any) { delete(m, "cutConnections") }), `no "cutConnections"`},
		{"negative cutConnections", valid(func(m map[string]any) { m["cutConnections"] = -1 }), "negative"},
		{"cut connections with outcome completed", valid(func(m map[string]any) { m["outcome"] = "completed" }), "2 cut connections"},
		{"no abandoned list", valid(func(m map[string]any) { delete(m, "abandoned") }), `no "abandoned"`},
		{"abandoned null", valid(func(m map[string]any) { m["abandoned"] = nil }), `no "abandoned"`},
		{"abandoned not strings", valid(func(m map[string]any) { m["abandoned"] = []int{1} }), "cannot unmarshal"},
		{"an empty binding name", valid(func(m map[string]any) { m["abandoned"] = []string{"a", ""} }), "abandoned[1] is empty"},
		{"no abandonedOmitted", valid(func(m map[string]any) { delete(m, "abandonedOmitted") }), `no "abandonedOmitted"`},
		{"a negative abandonedOmitted", valid(func(m map[string]any) { m["abandonedOmitted"] = -1 }), "abandonedOmitted is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseTerminationMessage([]byte(tt.data))
			if err == nil {
				t.Fatalf("accepted %q as %+v", tt.data, m)
			}
			if !strings.Contains(err.Error(), tt.words) || !strings.HasPrefix(err.Error(), "termination message: ") {
				t.Fatalf("error %q, want it to say %q", err, tt.words)
			}
		})
	}
	// The edits above start from a message that parses: each refusal is the edit's.
	if _, err := ParseTerminationMessage([]byte(valid(func(m map[string]any) { m["future"] = true }))); err != nil {
		t.Fatalf("a field this version does not know must be ignored: %v", err)
	}
}

func TestMarshalRefusesWhatParseRefuses(t *testing.T) {
	for _, m := range []TerminationMessage{
		{Outcome: "killed"},
		{Outcome: DrainCompleted, Drain: -time.Millisecond},
		{Outcome: DrainCompleted, Drain: time.Second, Steps: DrainSteps{InFlight: 2 * time.Second}},
		{Outcome: DrainCompleted, CutConnections: 1},
		{Outcome: DrainCut, Abandoned: []string{""}},
	} {
		if line, err := m.Marshal(); err == nil {
			t.Errorf("Marshal(%+v) = %s, want an error", m, line)
		}
	}
}

// FuzzParseTerminationMessage: whatever the input, Parse never panics, and what it
// accepts marshals back into a line that fits Kubernetes' limit and parses to the same
// message (a name list longer than the limit shortened, with its count kept).
func FuzzParseTerminationMessage(f *testing.F) {
	line, _ := sampleMessage().Marshal()
	f.Add(line)
	f.Add([]byte(`{"v":1,"outcome":"completed","drainMs":0,"steps":{"drainDelayMs":0,"listenerClosedMs":0,"inFlightMs":0,"bindingsMs":0},"cutConnections":0,"abandoned":[],"abandonedOmitted":0}` + "\n"))
	f.Add([]byte(`{}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseTerminationMessage(data)
		if err != nil {
			return
		}
		line, err := m.Marshal()
		if err != nil {
			t.Fatalf("Parse accepted %q as %+v, which Marshal refuses: %v", data, m, err)
		}
		if len(line)+1 > MaxTerminationMessageBytes || bytes.ContainsAny(line, "\n\r") {
			t.Fatalf("Marshal wrote %d bytes or more than a line: %q", len(line), line)
		}
		again, err := ParseTerminationMessage(line)
		if err != nil {
			t.Fatalf("Parse refuses Marshal's %q: %v", line, err)
		}
		kept := len(again.Abandoned)
		if kept > len(m.Abandoned) || again.AbandonedOmitted != m.AbandonedOmitted+len(m.Abandoned)-kept {
			t.Fatalf("the abandoned count changed: %+v then %+v", m, again)
		}
		// Names decode to valid UTF-8, so a second round trip is exact.
		m.Abandoned, m.AbandonedOmitted = m.Abandoned[:kept], again.AbandonedOmitted
		if !reflect.DeepEqual(again, m) || !slices.Equal(again.Abandoned, m.Abandoned) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", again, m)
		}
	})
}
