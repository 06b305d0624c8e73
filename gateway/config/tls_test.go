package config

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"
)

func TestACertificateNearOrPastItsExpiryIsAWarning(t *testing.T) {
	files := newFiles(t)
	pair, err := tls.LoadX509KeyPair(files.cert, files.key)
	if err != nil {
		t.Fatal(err)
	}
	notAfter := pair.Leaf.NotAfter
	date := notAfter.UTC().Format(time.RFC3339)
	text := files.tls("", "") // certificate_file is line 2
	tests := []struct {
		name  string
		now   time.Time
		words []string // of the one warning; none when nil
	}{
		{"thirty days before", notAfter.Add(-30 * 24 * time.Hour), nil},
		{"just over seven days before", notAfter.Add(-7*24*time.Hour - time.Minute), nil},
		{"six days before", notAfter.Add(-6*24*time.Hour - 2*time.Hour), []string{"expires at " + date, "in 6 days 2 hours", "rotate"}},
		{"an hour before", notAfter.Add(-time.Hour), []string{"expires at " + date, "in 1h"}},
		{"a day after", notAfter.Add(25 * time.Hour), []string{"expired at " + date, "1 days 1 hours ago"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseDoc([]byte(text), "t.toml", Options{Now: tt.now})
			if err != nil {
				t.Fatalf("a warning refused the configuration: %v", err)
			}
			ws := cfg.Warnings()
			if tt.words == nil {
				if len(ws) != 0 {
					t.Fatalf("warnings %v", ws)
				}
				return
			}
			if len(ws) != 1 || ws[0].Key != "server.tls.certificate_file" || ws[0].Line != 2 {
				t.Fatalf("warnings %+v, want one on server.tls.certificate_file, line 2", ws)
			}
			for _, w := range tt.words {
				if !strings.Contains(ws[0].String(), w) {
					t.Errorf("%q does not say %q", ws[0].String(), w)
				}
			}
		})
	}

	t.Run("a zero Now is the clock", func(t *testing.T) {
		// The fixture expires within the hour.
		cfg, err := parseDoc([]byte(text), "t.toml", Options{})
		if err != nil || len(cfg.Warnings()) != 1 {
			t.Fatalf("%v %v", cfg, err)
		}
	})
	t.Run("SkipFiles reads no certificate, so warns of none", func(t *testing.T) {
		cfg, err := parseDoc([]byte(text), "t.toml", Options{SkipFiles: true, Now: notAfter.Add(time.Hour)})
		if err != nil || len(cfg.Warnings()) != 0 {
			t.Fatalf("%v %v", cfg, err)
		}
	})
	t.Run("a configuration without TLS has no warning", func(t *testing.T) {
		cfg, err := parseDoc(nil, "t.toml", Options{Now: notAfter.Add(time.Hour)})
		if err != nil || len(cfg.Warnings()) != 0 {
			t.Fatalf("%v %v", cfg, err)
		}
	})
}
