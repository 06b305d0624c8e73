package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestThePMIRTable(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const issuer = "[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"https://i/keys\"\n"
	const table = "[pmir]\nurl = \"http://mpi.example/fhir\"\nendpoint = \"https://gw.example/gw/pmir/$process-message\"\nfeed_scope = \"pmir.feed\"\n"
	cases := []struct {
		name    string
		doc     string
		wantKey string // "" when the document is accepted
		wantMsg string
	}{
		{"the required keys", issuer + table, "", ""},
		{"every key", issuer + strings.Replace(table, "http:", "https:", 1) + "criteria = \"Patient?identifier=urn:oid:1.2|\"\ncheck_interval_ms = 100\ntimeout_ms = 60000\nbearer_token_file = \"" + token + "\"\n", "", ""},
		{"criteria by organization", issuer + table + "criteria = \"Patient?organization=Organization/1\"\n", "", ""},
		{"no url", issuer + "[pmir]\nendpoint = \"https://gw/pmir/$process-message\"\nfeed_scope = \"s\"\n", "pmir.url", "is required"},
		{"a url with credentials", issuer + strings.Replace(table, "http://mpi", "http://u:p@mpi", 1), "pmir.url", "credentials"},
		{"no endpoint", issuer + "[pmir]\nurl = \"http://mpi/fhir\"\nfeed_scope = \"s\"\n", "pmir.endpoint", "is required"},
		{"an endpoint that is not the feed route", issuer + strings.Replace(table, "/gw/pmir/$process-message", "/feed", 1), "pmir.endpoint", "must end with /pmir/$process-message"},
		{"an endpoint that is no URL", issuer + strings.Replace(table, "https://gw.example", "gw.example", 1), "pmir.endpoint", "absolute http or https"},
		{"criteria of another type", issuer + table + "criteria = \"Observation\"\n", "pmir.criteria", "ITI-94"},
		{"criteria by another parameter", issuer + table + "criteria = \"Patient?name=x\"\n", "pmir.criteria", "\"name\""},
		{"criteria with two parameters", issuer + table + "criteria = \"Patient?_id=1&_id=2\"\n", "pmir.criteria", "ITI-94"},
		{"a check interval under 100 ms", issuer + table + "check_interval_ms = 99\n", "pmir.check_interval_ms", "99 is less than the minimum, 100"},
		{"a check interval past a day", issuer + table + "check_interval_ms = 86400001\n", "pmir.check_interval_ms", "more than the maximum, 86400000"},
		{"a zero timeout", issuer + table + "timeout_ms = 0\n", "pmir.timeout_ms", "greater than zero"},
		{"a timeout past a minute", issuer + table + "timeout_ms = 60001\n", "pmir.timeout_ms", "more than the maximum, 60000"},
		{"no feed scope", issuer + "[pmir]\nurl = \"http://mpi/fhir\"\nendpoint = \"https://gw/pmir/$process-message\"\n", "pmir.feed_scope", "must not be empty"},
		{"a feed scope without an issuer", "[auth]\ndata_plane = \"open\"\n" + table, "pmir.feed_scope", "needs [[auth.issuers]]"},
		{"a missing token file", issuer + table + "bearer_token_file = \"" + filepath.Join(dir, "nope") + "\"\n", "pmir.bearer_token_file", "no such file"},
		{"an unknown key", issuer + table + "retries = 2\n", "pmir.retries", "unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseDoc([]byte(tc.doc), "t.toml", Options{})
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.PMIR.Criteria == "" {
					t.Errorf("criteria default not applied: %+v", c.PMIR)
				}
				return
			}
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("err = %v, want the problems", err)
			}
			for _, p := range ps.List {
				if p.Key == tc.wantKey && strings.Contains(p.Message, tc.wantMsg) {
					return
				}
			}
			t.Fatalf("no problem of %s saying %q in %v", tc.wantKey, tc.wantMsg, ps)
		})
	}
}

func TestThePMIRDefaults(t *testing.T) {
	c, err := parseDoc([]byte("[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"https://i/keys\"\n"+
		"[pmir]\nurl = \"http://m/fhir\"\nendpoint = \"http://gw/pmir/$process-message\"\nfeed_scope = \"f\"\n"), "t.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.PMIR.Criteria != DefaultPMIRCriteria || c.PMIR.CheckInterval() != time.Minute || c.PMIR.Timeout() != 5*time.Second {
		t.Errorf("pmir = %+v", c.PMIR)
	}
	c, err = parseDoc([]byte("[server]\n"), "t.toml", Options{})
	if err != nil || c.PMIR != nil {
		t.Fatalf("an absent [pmir] decoded as %+v (%v)", c.PMIR, err)
	}
}
