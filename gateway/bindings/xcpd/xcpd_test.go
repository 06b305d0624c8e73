package xcpd_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/xcpd"
)

func envelope(body string) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="` + xcpd.SOAPNamespace + `"><env:Header/><env:Body>` + body + `</env:Body></env:Envelope>`)
}

func answer(ack, code, events string) string {
	return `<PRPA_IN201306UV02 xmlns="urn:hl7-org:v3"><acknowledgement><typeCode code="` + ack + `"/></acknowledgement><controlActProcess>` + events +
		`<queryAck><queryResponseCode code="` + code + `"/></queryAck></controlActProcess></PRPA_IN201306UV02>`
}

func event(community string) string {
	return `<subject><registrationEvent><custodian><assignedEntity><id root="` + community + `"/></assignedEntity></custodian></registrationEvent></subject>`
}

// The published ITI-55 response (oehf/ipf's sample, test/doubles/respondinggateway/testdata) in its
// envelope: the custodian of each registrationEvent is a holding community.
func TestParseThePublishedResponse(t *testing.T) {
	raw, err := os.ReadFile("../../../test/doubles/respondinggateway/testdata/ipf/iti55-sample-response.xml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := xcpd.Parse(envelope(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Communities) != 1 || !a.Holds("urn:oid:1.2.840.114350.1.13.99998.8734") {
		t.Fatalf("communities %v", a.Communities)
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		body    []byte
		holders []string
		refused string // part of the error, "" when read
	}{
		{"case 1/2: two communities", envelope(answer("AA", "OK", event("1.2.1")+event("urn:oid:1.2.2"))), []string{"1.2.1", "1.2.2"}, ""},
		{"case 3: no event", envelope(answer("AA", "OK", "")), nil, ""},
		{"case 4: NF", envelope(answer("AA", "NF", "")), nil, ""},
		{"case 5: AE", envelope(answer("AE", "AE", "")), nil, "case 5"},
		{"a SOAP fault", envelope(`<env:Fault><env:Code><env:Value>env:Receiver</env:Value></env:Code></env:Fault>`), nil, "fault"},
		{"no envelope", []byte(answer("AA", "OK", "")), nil, "not a SOAP envelope"},
		{"an envelope without an answer", envelope(`<x/>`), nil, "without a PRPA_IN201306UV02"},
		{"a cut answer", envelope(answer("AA", "OK", event("1.2.1")))[:200], nil, "well-formed"},
		{"an entity bomb", bomb(), nil, "DOCTYPE"},
		{"an external entity", []byte(`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><env:Envelope xmlns:env="` + xcpd.SOAPNamespace + `">&e;</env:Envelope>`), nil, "DOCTYPE"},
		{"an undeclared entity", envelope(`<x>&lol9;</x>`), nil, "well-formed"},
		{"10,000 nested elements", deep(10000), nil, "deeper than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := xcpd.Parse(tc.body)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err = %v, want one saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Communities) != len(tc.holders) {
				t.Fatalf("communities %v, want %v", a.Communities, tc.holders)
			}
			for _, h := range tc.holders {
				if !a.Holds("urn:oid:" + strings.TrimPrefix(h, "urn:oid:")) {
					t.Fatalf("%s does not hold: %v", h, a.Communities)
				}
			}
		})
	}
}

func bomb() []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><!DOCTYPE env:Envelope [<!ENTITY lol0 "lol">`)
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, `<!ENTITY lol%d "%s">`, i, strings.Repeat(fmt.Sprintf("&lol%d;", i-1), 10))
	}
	b.WriteString(`]>`)
	b.Write(envelope(`<x>&lol9;</x>`))
	return []byte(b.String())
}

func deep(n int) []byte {
	return envelope(answer("AA", "OK", strings.Repeat("<subject>", n)+strings.Repeat("</subject>", n)))
}

// A hostile answer is refused after reading what it takes to see it: the memory the
// parse allocates does not grow with the nesting past the bound.
func TestAHostileAnswerIsRefusedInBoundedMemory(t *testing.T) {
	alloc := func(body []byte) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := xcpd.Parse(body); err == nil {
			t.Fatal("a hostile answer parsed")
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(deep(1000)), alloc(deep(100000))
	// A hundred times the nesting costs the same: the parse stops at MaxDepth.
	if large > 2*small+64<<10 {
		t.Fatalf("100,000 nested elements allocated %d bytes, 1,000 %d: the parse did not stop at the bound", large, small)
	}
}
