package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMillisecondKeysOutOfRangeAreRefusedBeforeTheyWrap(t *testing.T) {
	const member = "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a/fhir\"\n"
	const issuer = "[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"https://i/keys\"\n"
	cases := []struct {
		name, doc, key, max string
	}{
		// 18446744083710 ms is 2^64 ns + 10 s: converted first, it read as 10 s.
		{"a request timeout that wraps to 10 s", "[server]\nrequest_timeout_ms = 18446744083710\n", "server.request_timeout_ms", "3600000 (1h0m0s)"},
		// 18446744073710 ms wraps to 448384 ns, under half a millisecond.
		{"a read header timeout that wraps to 0.45 ms", "[server]\nread_header_timeout_ms = 18446744073710\n", "server.read_header_timeout_ms", "300000 (5m0s)"},
		{"the largest check timeout", "[health]\ncheck_timeout_ms = 9223372036854775807\n", "health.check_timeout_ms", "60000 (1m0s)"},
		{"a drain delay just past the hour", "[server]\ndrain_delay_ms = 3600001\n", "server.drain_delay_ms", "3600000 (1h0m0s)"},
		{"a shutdown timeout that wraps", "[server]\nshutdown_timeout_ms = 18446744083710\n", "server.shutdown_timeout_ms", "3600000 (1h0m0s)"},
		{"a bindings drain timeout of MaxInt64", "[server]\nbindings_drain_timeout_ms = 9223372036854775807\n", "server.bindings_drain_timeout_ms", "3600000 (1h0m0s)"},
		{"a cache TTL past the hour", "[health]\ncache_ttl_ms = 3600001\n", "health.cache_ttl_ms", "3600000 (1h0m0s)"},
		{"a JWKS refresh that wraps", issuer + "jwks_refresh_ms = 18446744083710\n", "auth.issuers[0].jwks_refresh_ms", "86400000 (24h0m0s)"},
		{"a member timeout of MaxInt64", member + "timeout_ms = 9223372036854775807\n", "registry.members[0].timeout_ms", "3600000 (1h0m0s)"},
		{"a capability TTL past the day", "[federation]\ncapability_ttl_ms = 86400001\n", "federation.capability_ttl_ms", "86400000 (24h0m0s)"},
		{"a page token TTL past the day", "[federation]\npage_token_ttl_ms = 86400001\n", "federation.page_token_ttl_ms", "86400000 (24h0m0s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDoc([]byte(tc.doc), "t.toml", Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			var ps *Problems
			if !errors.As(err, &ps) || len(ps.List) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			p := ps.List[0]
			if p.Key != tc.key || p.Line == 0 || !strings.Contains(p.Message, "more than the maximum, "+tc.max) {
				t.Fatalf("got %s; want %s refused with its maximum %s", p, tc.key, tc.max)
			}
		})
	}
}

func TestMillisecondKeysAtTheirMaximumAreAccepted(t *testing.T) {
	doc := fmt.Sprintf(`[server]
request_timeout_ms = %[1]d
drain_delay_ms = %[1]d
shutdown_timeout_ms = %[1]d
bindings_drain_timeout_ms = %[1]d
read_header_timeout_ms = %[2]d
[health]
check_timeout_ms = %[3]d
cache_ttl_ms = %[4]d
[federation]
capability_ttl_ms = %[5]d
page_token_ttl_ms = %[5]d
[[auth.issuers]]
issuer = "i"
audience = "a"
operator_scope = "op"
jwks_url = "https://i/keys"
jwks_refresh_ms = %[6]d
[[registry.members]]
id = "a"
query_endpoint = "http://a/fhir"
timeout_ms = %[1]d
`, MaxBudgetMS, MaxReadHeaderTimeoutMS, MaxCheckTimeoutMS, MaxCacheTTLMS, MaxCapabilityTTLMS, MaxJWKSRefreshMS)
	c, err := parseDoc([]byte(doc), "t.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Lifecycle().RequestTimeout != time.Hour || c.Server.ReadHeaderTimeout() != 5*time.Minute || c.Health.CheckTimeout() != time.Minute || c.Health.CacheTTL() != time.Hour {
		t.Fatalf("the maxima did not convert as written: %+v", c.Lifecycle())
	}
}

func TestMsSaturatesInsteadOfWrapping(t *testing.T) {
	for _, v := range []int64{18446744083710, math.MaxInt64, math.MaxInt64/int64(time.Millisecond) + 1} {
		if d := ms(v); d != time.Duration(math.MaxInt64) {
			t.Errorf("ms(%d) = %s, want the largest duration", v, d)
		}
	}
	if d := ms(math.MinInt64); d != time.Duration(math.MinInt64) {
		t.Errorf("ms(MinInt64) = %s", d)
	}
	if d := ms(1500); d != 1500*time.Millisecond {
		t.Errorf("ms(1500) = %s", d)
	}
}

// Every *_ms key of the schema has a range in MillisecondKeys, and nothing else is
// there: a new key without a documented maximum fails here.
func TestEveryMillisecondKeyHasAMaximum(t *testing.T) {
	var schema []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(prefix, f.Type) // an embedded table's keys are the table's own
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			ft := f.Type
			key := prefix + name
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				walk(key+"[].", ft.Elem())
				continue
			}
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				walk(key+".", ft.Elem()) // an optional table, such as [audit]
				continue
			}
			if ft.Kind() == reflect.Struct {
				walk(key+".", ft)
				continue
			}
			if strings.HasSuffix(name, "_ms") {
				schema = append(schema, key)
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
	var listed []string
	for _, m := range MillisecondKeys {
		listed = append(listed, m.Key)
		if m.Max <= 0 || m.Max > math.MaxInt64/int64(time.Millisecond) || m.Min < 0 || m.Min > m.Max || m.Bounds == "" || m.Default == "" {
			t.Errorf("%s: an unusable range or an undocumented row: %+v", m.Key, m)
		}
	}
	slices.Sort(schema)
	slices.Sort(listed)
	if !slices.Equal(schema, listed) {
		t.Fatalf("the schema's *_ms keys %v are not the listed ones %v", schema, listed)
	}
}

// The README's "Limits" table lists every millisecond key with its default and range.
func TestTheReadmeListsEveryMillisecondKey(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, limits, ok := strings.Cut(string(data), "\n## Limits\n")
	if !ok {
		t.Fatal("the README has no Limits section")
	}
	limits, _, _ = strings.Cut(limits, "\n## ")
	rows := map[string][]string{}
	for line := range strings.SplitSeq(limits, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) == 4 {
			rows[strings.Trim(cells[0], "`")] = cells
		}
	}
	for _, m := range MillisecondKeys {
		row, ok := rows[m.Key]
		if !ok {
			t.Errorf("the Limits table has no row for %s", m.Key)
			continue
		}
		wantRange := fmt.Sprintf("%d to %d (%s)", m.Min, m.Max, time.Duration(m.Max)*time.Millisecond)
		if strings.ReplaceAll(row[1], "`", "") != m.Default || !strings.HasPrefix(row[2], wantRange) {
			t.Errorf("the row of %s says default %q, range %q; want %q, %q", m.Key, row[1], row[2], m.Default, wantRange)
		}
	}
}
