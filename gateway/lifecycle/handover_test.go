package lifecycle_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

func TestHandOverMessageRoundTrips(t *testing.T) {
	m := lifecycle.HandOverMessage{Outcome: lifecycle.HandOverTimeout, Delivered: 7,
		Left: []lifecycle.SpoolLeft{{Destination: "repository", Records: 3, Bytes: 2048}, {Destination: "feed", Records: 0, Bytes: 0}}}
	line, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"kind":"audit-drain","outcome":"timeout","delivered":7,"audit":[{"destination":"repository","records":3,"bytes":2048},{"destination":"feed","records":0,"bytes":0}]}`
	if string(line) != want {
		t.Fatalf("line\n got %s\nwant %s", line, want)
	}
	back, err := lifecycle.ParseHandOverMessage(append(line, '\n'))
	if err != nil {
		t.Fatal(err)
	}
	if back.Outcome != m.Outcome || back.Delivered != 7 || len(back.Left) != 2 || back.Left[0] != m.Left[0] {
		t.Fatalf("parsed %+v, want %+v", back, m)
	}
	if r, b := lifecycle.Undelivered(back.Left); r != 3 || b != 2048 {
		t.Fatalf("Undelivered = %d records, %d bytes; want 3, 2048", r, b)
	}
	empty, err := lifecycle.HandOverMessage{Outcome: lifecycle.HandOverEmpty}.Marshal()
	if err != nil || !strings.Contains(string(empty), `"audit":[]`) {
		t.Fatalf("an empty hand-over: %s, %v", empty, err)
	}
}

func TestHandOverMessageRefuses(t *testing.T) {
	for name, line := range map[string]string{
		"a drain's message":      `{"v":1,"outcome":"completed","drainMs":0,"steps":{"drainDelayMs":0,"listenerClosedMs":0,"inFlightMs":0,"bindingsMs":0},"cutConnections":0,"abandoned":[],"abandonedOmitted":0}`,
		"another version":        `{"v":2,"kind":"audit-drain","outcome":"empty","delivered":0,"audit":[]}`,
		"no audit":               `{"v":1,"kind":"audit-drain","outcome":"empty","delivered":0}`,
		"unknown outcome":        `{"v":1,"kind":"audit-drain","outcome":"done","delivered":0,"audit":[]}`,
		"negative delivered":     `{"v":1,"kind":"audit-drain","outcome":"timeout","delivered":-1,"audit":[]}`,
		"empty with records":     `{"v":1,"kind":"audit-drain","outcome":"empty","delivered":0,"audit":[{"destination":"repository","records":1,"bytes":10}]}`,
		"records in no bytes":    `{"v":1,"kind":"audit-drain","outcome":"timeout","delivered":0,"audit":[{"destination":"repository","records":1,"bytes":0}]}`,
		"no destination":         `{"v":1,"kind":"audit-drain","outcome":"timeout","delivered":0,"audit":[{"destination":"","records":0,"bytes":0}]}`,
		"two values":             `{"v":1,"kind":"audit-drain","outcome":"empty","delivered":0,"audit":[]} {}`,
		"longer than 4096 bytes": `{"v":1,"kind":"audit-drain","outcome":"empty","delivered":0,"audit":[]}` + strings.Repeat(" ", 4096),
	} {
		if m, err := lifecycle.ParseHandOverMessage([]byte(line)); err == nil {
			t.Errorf("%s: parsed as %+v", name, m)
		}
	}
}

func TestTerminationMessageCarriesTheSpools(t *testing.T) {
	m := lifecycle.TerminationMessage{Outcome: lifecycle.DrainCompleted, Drain: 2 * time.Second, Abandoned: []string{},
		Audit: []lifecycle.SpoolLeft{{Destination: "repository", Records: 5, Bytes: 900}}}
	line, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := lifecycle.ParseTerminationMessage(line)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Audit) != 1 || back.Audit[0] != m.Audit[0] {
		t.Fatalf("audit %+v, want %+v (line %s)", back.Audit, m.Audit, line)
	}
	old := `{"v":1,"outcome":"completed","drainMs":5,"steps":{"drainDelayMs":0,"listenerClosedMs":0,"inFlightMs":0,"bindingsMs":0},"cutConnections":0,"abandoned":[],"abandonedOmitted":0}`
	if back, err := lifecycle.ParseTerminationMessage([]byte(old)); err != nil || back.Audit != nil {
		t.Fatalf("a message from before the audit field: %+v, %v", back, err)
	}
	bad := lifecycle.TerminationMessage{Outcome: lifecycle.DrainCompleted, Abandoned: []string{},
		Audit: []lifecycle.SpoolLeft{{Destination: "repository", Records: -1}}}
	if _, err := bad.Marshal(); err == nil {
		t.Fatal("a negative count was written")
	}
}
