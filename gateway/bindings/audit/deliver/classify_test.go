package deliver_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		want   deliver.Verdict
	}{
		{200, deliver.Delivered}, {201, deliver.Delivered}, {204, deliver.Delivered},
		{301, deliver.Retry}, {307, deliver.Retry},
		{400, deliver.Rejected}, {404, deliver.Rejected}, {409, deliver.Rejected}, {413, deliver.Rejected}, {422, deliver.Rejected},
		{401, deliver.RetryAuth}, {403, deliver.RetryAuth},
		{408, deliver.Retry}, {429, deliver.Retry},
		{500, deliver.Retry}, {502, deliver.Retry}, {503, deliver.Retry}, {599, deliver.Retry},
	} {
		if got := deliver.Classify(c.status); got != c.want {
			t.Errorf("Classify(%d) = %s, want %s", c.status, got, c.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const limit = 60 * time.Second
	for _, c := range []struct {
		name, v string
		want    time.Duration
		ok      bool
	}{
		{"absent", "", 0, false},
		{"seconds", "7", 7 * time.Second, true},
		{"zero seconds", "0", 0, true},
		{"seconds past the limit are the limit", "86400", limit, true},
		{"seconds past 2^63 are unreadable", "99999999999999999999", 0, false},
		{"an HTTP-date", "Tue, 01 Dec 2026 10:00:30 GMT", 30 * time.Second, true},
		{"an HTTP-date in the past is now", "Tue, 01 Dec 2026 09:00:00 GMT", 0, true},
		{"an HTTP-date far ahead is the limit", "Wed, 02 Dec 2026 10:00:00 GMT", limit, true},
		{"negative seconds are unreadable", "-5", 0, false},
		{"garbage", "soon", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := deliver.ParseRetryAfter(c.v, now, limit)
			if got != c.want || ok != c.ok {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.v, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestBackoffIsFullJitterUnderACappedDoubling(t *testing.T) {
	base, limit := time.Second, 60*time.Second
	for _, c := range []struct {
		attempt int
		ceil    time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 32 * time.Second}, {7, limit}, {50, limit}} {
		if got := deliver.Backoff(c.attempt, base, limit, 0.999999); got > c.ceil || got < c.ceil*99/100 {
			t.Errorf("attempt %d near r=1: %v, want just under %v", c.attempt, got, c.ceil)
		}
		if got := deliver.Backoff(c.attempt, base, limit, 0); got != 0 {
			t.Errorf("attempt %d at r=0: %v, want 0 (full jitter)", c.attempt, got)
		}
	}
}

func TestTheEventIDTagKeepsAnAuditEventValidR4(t *testing.T) {
	ex, err := os.ReadFile("../../../../test/doubles/auditrepo/testdata/balp/AuditEvent-ex-auditBasicQueryGetServer.json")
	if err != nil {
		t.Fatal(err)
	}
	id := deliver.NewEventID()
	if len(id) != 36 || id[14] != '4' {
		t.Fatalf("NewEventID = %q, want a version-4 UUID", id)
	}
	stamped, err := deliver.StampEventID(ex, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := fhirschema.Validate(stamped); err != nil {
		t.Errorf("stamped event not valid R4: %v", err)
	}
	if got, ok := deliver.EventID(stamped); !ok || got != id {
		t.Errorf("EventID = %q, %v; want %q", got, ok, id)
	}
	again, err := deliver.StampEventID(stamped, "other")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Meta struct {
			Tag      []json.RawMessage `json:"tag"`
			Security []json.RawMessage `json:"security"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(again, &m); err != nil || len(m.Meta.Tag) != 1 || len(m.Meta.Security) != 1 {
		t.Errorf("restamped meta = %+v (%v), want one tag, the security label kept", m.Meta, err)
	}
	if got, _ := deliver.EventID(again); got != "other" {
		t.Errorf("restamped id = %q, want other", got)
	}
	if _, err := deliver.StampEventID([]byte(`{"resourceType":"Patient"}`), id); err == nil {
		t.Error("a Patient was stamped")
	}
}
