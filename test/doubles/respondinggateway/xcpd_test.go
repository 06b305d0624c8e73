package respondinggateway_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/respondinggateway"
)

// envelope wraps a PRPA_IN201305UV02 in the SOAP 1.2 envelope ITI-55 sends.
func envelope(body string) string {
	body = strings.TrimSpace(body)
	return `<?xml version="1.0" encoding="UTF-8"?>
<soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope" xmlns:wsa="http://www.w3.org/2005/08/addressing">
<soap:Header>
<wsa:Action soap:mustUnderstand="1">` + respondinggateway.RequestAction + `</wsa:Action>
<wsa:MessageID>urn:uuid:6a7e6c5e-1f0a-4b6e-9d53-2b1e8f3c9a10</wsa:MessageID>
<wsa:ReplyTo><wsa:Address>http://www.w3.org/2005/08/addressing/anonymous</wsa:Address></wsa:ReplyTo>
</soap:Header>
<soap:Body>` + body + `</soap:Body>
</soap:Envelope>`
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, url, contentType, body string) answer {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

const soap12 = `application/soap+xml; charset=utf-8; action="` + respondinggateway.RequestAction + `"`

type code struct {
	Code       string `xml:"code,attr"`
	CodeSystem string `xml:"codeSystem,attr"`
}

type device struct {
	ID              respondinggateway.II `xml:"id"`
	HomeCommunityID respondinggateway.II `xml:"asAgent>representedOrganization>id"`
}

// response is what a binding reads of a PRPA_IN201306UV02.
type response struct {
	XMLName  xml.Name
	Receiver device `xml:"receiver>device"`
	Sender   device `xml:"sender>device"`
	Ack      struct {
		TypeCode code                 `xml:"typeCode"`
		Target   respondinggateway.II `xml:"targetMessage>id"`
		Detail   []struct {
			Code code   `xml:"code"`
			Text string `xml:"text"`
		} `xml:"acknowledgementDetail"`
	} `xml:"acknowledgement"`
	Events []struct {
		Patient   respondinggateway.II `xml:"subject1>patient>id"`
		Given     string               `xml:"subject1>patient>patientPerson>name>given"`
		Family    string               `xml:"subject1>patient>patientPerson>name>family"`
		Custodian respondinggateway.II `xml:"custodian>assignedEntity>id"`
	} `xml:"controlActProcess>subject>registrationEvent"`
	Requested []code `xml:"controlActProcess>reasonOf>detectedIssueEvent>triggerFor>actOrderRequired>code"`
	QueryAck  struct {
		QueryID respondinggateway.II `xml:"queryId"`
		Code    code                 `xml:"queryResponseCode"`
	} `xml:"controlActProcess>queryAck"`
}

type soapAnswer struct {
	XMLName xml.Name
	Header  struct {
		Action    string `xml:"Action"`
		RelatesTo string `xml:"RelatesTo"`
	} `xml:"Header"`
	Body struct {
		Response *response `xml:"PRPA_IN201306UV02"`
		Fault    *struct {
			Code   string `xml:"Code>Value"`
			Reason string `xml:"Reason>Text"`
		} `xml:"Fault"`
	} `xml:"Body"`
}

func read(t *testing.T, a answer) soapAnswer {
	t.Helper()
	if mt := a.header.Get("Content-Type"); !strings.HasPrefix(mt, "application/soap+xml") {
		t.Fatalf("Content-Type %q", mt)
	}
	var s soapAnswer
	if err := xml.Unmarshal(a.body, &s); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
	if s.XMLName.Space != respondinggateway.SOAPNamespace || s.XMLName.Local != "Envelope" {
		t.Fatalf("not a SOAP 1.2 envelope: %v", s.XMLName)
	}
	return s
}

func readResponse(t *testing.T, a answer) response {
	t.Helper()
	s := read(t, a)
	if a.status != 200 || s.Body.Response == nil {
		t.Fatalf("status %d, no PRPA_IN201306UV02: %s", a.status, a.body)
	}
	if s.Header.Action != respondinggateway.ResponseAction || s.Header.RelatesTo != "urn:uuid:6a7e6c5e-1f0a-4b6e-9d53-2b1e8f3c9a10" {
		t.Fatalf("header %+v", s.Header)
	}
	if s.Body.Response.XMLName.Space != respondinggateway.HL7Namespace {
		t.Fatalf("namespace %q", s.Body.Response.XMLName.Space)
	}
	return *s.Body.Response
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/ipf/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPublishedExamples sends the published request to a gateway holding the
// published response's two records and compares every field a binding reads.
func TestPublishedExamples(t *testing.T) {
	var want response
	if err := xml.Unmarshal(readFile(t, "iti55-sample-response.xml"), &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Events) != 2 {
		t.Fatalf("the published response has %d registrationEvents", len(want.Events))
	}
	entry := respondinggateway.Entry{
		// The request's first livingSubjectId.
		IDs:    []respondinggateway.II{{Root: "1.2.840.114350.1.13.99997.2.3412", Extension: "1234"}},
		Person: respondinggateway.Person{Given: "Jimmy", Family: "Jones", Gender: "M", BirthTime: "19630805"},
	}
	for _, e := range want.Events {
		entry.Records = append(entry.Records, respondinggateway.Record{HomeCommunityID: e.Custodian.Root, Patient: e.Patient})
	}
	s := respondinggateway.Start(t, respondinggateway.Options{HomeCommunityID: "1.2.840.114350.1.13.99998.8734", Entries: []respondinggateway.Entry{entry}})
	got := readResponse(t, post(t, s.URL, soap12, envelope(string(readFile(t, "iti55-sample-request.xml")))))
	if got.Ack.TypeCode != want.Ack.TypeCode || got.Ack.Target != want.Ack.Target {
		t.Errorf("acknowledgement %+v, want %+v", got.Ack, want.Ack)
	}
	if got.QueryAck != want.QueryAck {
		t.Errorf("queryAck %+v, want %+v", got.QueryAck, want.QueryAck)
	}
	if got.Receiver != want.Receiver || got.Sender.ID != want.Sender.ID {
		t.Errorf("receiver %+v sender %+v, want %+v %+v", got.Receiver, got.Sender, want.Receiver, want.Sender)
	}
	for i := range want.Events {
		g, w := got.Events[i], want.Events[i]
		if g.Patient != w.Patient || g.Custodian != w.Custodian {
			t.Errorf("registrationEvent %d: %+v, want %+v", i, g, w)
		}
	}
	if len(got.Events) != len(want.Events) {
		t.Errorf("%d registrationEvents, want %d", len(got.Events), len(want.Events))
	}
	t.Run("the same request by demographics alone finds the same records", func(t *testing.T) {
		req := string(readFile(t, "iti55-sample-request.xml"))
		start, end := strings.Index(req, "<livingSubjectId>"), strings.LastIndex(req, "</livingSubjectId>")
		req = req[:start] + req[end+len("</livingSubjectId>"):]
		if got := readResponse(t, post(t, s.URL, soap12, envelope(req))); len(got.Events) != 2 || got.QueryAck.Code.Code != "OK" {
			t.Fatalf("%+v", got)
		}
	})
}

// query is a PRPA_IN201305UV02 naming a patient by one id, sent to a community.
func query(root, ext, receiverCommunity string) string {
	receiver := `<receiver typeCode="RCV"><device classCode="DEV" determinerCode="INSTANCE"><id root="9.9.9"/>`
	if receiverCommunity != "" {
		receiver += `<asAgent classCode="AGNT"><representedOrganization classCode="ORG" determinerCode="INSTANCE"><id root="` + receiverCommunity + `"/></representedOrganization></asAgent>`
	}
	receiver += `</device></receiver>`
	return `<hl7:PRPA_IN201305UV02 xmlns:hl7="urn:hl7-org:v3" ITSVersion="XML_1.0"><hl7:id root="1.2.3" extension="q1"/>` + receiver +
		`<hl7:sender typeCode="SND"><hl7:device classCode="DEV" determinerCode="INSTANCE"><hl7:id root="7.7.7"/></hl7:device></hl7:sender>` +
		`<hl7:controlActProcess classCode="CACT" moodCode="EVN"><hl7:queryByParameter><hl7:queryId root="1.2.3" extension="qq"/><hl7:parameterList>` +
		`<hl7:livingSubjectId><hl7:value root="` + root + `" extension="` + ext + `"/></hl7:livingSubjectId>` +
		`</hl7:parameterList></hl7:queryByParameter></hl7:controlActProcess></hl7:PRPA_IN201305UV02>`
}

const (
	mpi  = "1.2.3.100" // the domain the gateway is asked in
	hcA  = "2.16.1"    // community of member a
	hcB  = "2.16.2"    // community of member b
	hcC  = "2.16.3"    // community of member c
	self = "2.16.99"   // the gateway's own
)

var entries = []respondinggateway.Entry{
	{IDs: []respondinggateway.II{{Root: mpi, Extension: "P1"}}, Person: respondinggateway.Person{Given: "Ann", Family: "Lee", Gender: "F", BirthTime: "19800101"},
		Records: []respondinggateway.Record{{HomeCommunityID: hcA, Patient: respondinggateway.II{Root: hcA, Extension: "a-17"}}, {HomeCommunityID: hcB, Patient: respondinggateway.II{Root: hcB, Extension: "b-4"}}}},
	{IDs: []respondinggateway.II{{Root: mpi, Extension: "P2"}}, Case: respondinggateway.CaseMoreAttributes, Requested: []string{"LivingSubjectAdministrativeGenderRequested", "PatientAddressRequested"}},
	{IDs: []respondinggateway.II{{Root: mpi, Extension: "P3"}}, Case: respondinggateway.CaseError},
	{IDs: []respondinggateway.II{{Root: mpi, Extension: "P4"}}, Case: respondinggateway.CaseReceiverFault},
	{IDs: []respondinggateway.II{{Root: mpi, Extension: "P5"}}, Case: respondinggateway.CaseSenderFault},
	{IDs: []respondinggateway.II{{Root: mpi, Extension: "P6"}}, Records: []respondinggateway.Record{{HomeCommunityID: hcC, Patient: respondinggateway.II{Root: hcC, Extension: "c-1"}}}},
}

func TestCases(t *testing.T) {
	s := respondinggateway.Start(t, respondinggateway.Options{HomeCommunityID: self, Entries: entries, Communities: map[string]respondinggateway.Case{hcC: respondinggateway.CaseError}, Marker: "M-9"})
	type event struct{ patient, custodian string }
	for _, tc := range []struct {
		name, patient, community string
		ack, code                string
		events                   []event
		requested                []string
		detail                   string
		fault                    string
		status                   int
	}{
		{name: "case 2: every community's record, without a receiver community", patient: "P1", ack: "AA", code: "OK",
			events: []event{{"a-17", hcA}, {"b-4", hcB}}},
		{name: "case 2 to the gateway's own community is the same", patient: "P1", community: self, ack: "AA", code: "OK",
			events: []event{{"a-17", hcA}, {"b-4", hcB}}},
		{name: "case 1: one community's record when the request names it", patient: "P1", community: hcB, ack: "AA", code: "OK",
			events: []event{{"b-4", hcB}}},
		{name: "case 4: a community without a record", patient: "P1", community: hcC, ack: "AE", code: "AE", detail: "ResponderBusy"},
		{name: "case 4: an unknown patient", patient: "P9", ack: "AA", code: "NF"},
		{name: "case 3: more attributes requested, no registrationEvent", patient: "P2", ack: "AA", code: "OK",
			requested: []string{"LivingSubjectAdministrativeGenderRequested", "PatientAddressRequested"}},
		{name: "case 5: AE with the marker in its detail", patient: "P3", ack: "AE", code: "AE", detail: "ResponderBusy"},
		{name: "a community set to answer AE does so for its patients", patient: "P6", community: hcC, ack: "AE", code: "AE", detail: "ResponderBusy"},
		{name: "the same patient asked of every community is found", patient: "P6", ack: "AA", code: "OK", events: []event{{"c-1", hcC}}},
		{name: "a Receiver fault is a 500", patient: "P4", fault: "env:Receiver", status: 500},
		{name: "a Sender fault is a 400", patient: "P5", fault: "env:Sender", status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, s.URL, soap12, envelope(query(mpi, tc.patient, tc.community)))
			if tc.fault != "" {
				f := read(t, a).Body.Fault
				if a.status != tc.status || f == nil || f.Code != tc.fault || !strings.HasSuffix(f.Reason, "M-9") {
					t.Fatalf("%d %s", a.status, a.body)
				}
				return
			}
			r := readResponse(t, a)
			if r.Ack.TypeCode.Code != tc.ack || r.QueryAck.Code.Code != tc.code || r.Ack.Target != (respondinggateway.II{Root: "1.2.3", Extension: "q1"}) {
				t.Fatalf("ack %+v queryAck %+v", r.Ack, r.QueryAck)
			}
			var events []event
			for _, e := range r.Events {
				events = append(events, event{e.Patient.Extension, e.Custodian.Root})
			}
			if !slices.Equal(events, tc.events) {
				t.Fatalf("events %v, want %v", events, tc.events)
			}
			var requested []string
			for _, c := range r.Requested {
				if c.CodeSystem != respondinggateway.MoreAttributesSystem {
					t.Fatalf("code system %q", c.CodeSystem)
				}
				requested = append(requested, c.Code)
			}
			if !slices.Equal(requested, tc.requested) {
				t.Fatalf("requested %v, want %v", requested, tc.requested)
			}
			if tc.detail != "" && (len(r.Ack.Detail) != 1 || r.Ack.Detail[0].Code.Code != tc.detail || r.Ack.Detail[0].Code.CodeSystem != respondinggateway.ErrorCodeSystem || !strings.HasSuffix(r.Ack.Detail[0].Text, "M-9")) {
				t.Fatalf("detail %+v", r.Ack.Detail)
			}
		})
	}
	log := s.Log()
	if len(log) != 11 || !bytes.Contains(log[0].Body, []byte(`extension="P1"`)) || log[0].Method != "POST" || log[0].Path != respondinggateway.Path ||
		!strings.HasPrefix(log[0].Header.Get("Content-Type"), "application/soap+xml") {
		t.Fatalf("log of %d, first %+v", len(log), log[0])
	}
}

func TestRefusals(t *testing.T) {
	s := respondinggateway.Start(t, respondinggateway.Options{Entries: entries})
	good := envelope(query(mpi, "P1", ""))
	for _, tc := range []struct {
		name, ctype, body, reason string
		status                    int
	}{
		{"SOAP 1.1's media type is a 415", "text/xml", good, "Content-Type must be application/soap+xml", 415},
		{"a body that is no XML", soap12, "{", "the body is not XML", 400},
		{"a SOAP 1.1 envelope", soap12, strings.ReplaceAll(good, "http://www.w3.org/2003/05/soap-envelope", "http://schemas.xmlsoap.org/soap/envelope/"), "the body is not a SOAP 1.2 Envelope", 400},
		{"another WS-Addressing Action", soap12, strings.Replace(good, respondinggateway.RequestAction, "urn:ihe:iti:2007:CrossGatewayQuery", 1), "wsa:ActionNotSupported", 400},
		{"another action in the media type", `application/soap+xml; action="urn:x"`, good, "wsa:ActionNotSupported", 400},
		{"a Body without PRPA_IN201305UV02", soap12, envelope("<x/>"), "the Body holds no PRPA_IN201305UV02", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, s.URL, tc.ctype, tc.body)
			f := read(t, a).Body.Fault
			if a.status != tc.status || f == nil || f.Code != "env:Sender" || !strings.HasPrefix(f.Reason, tc.reason) || !strings.HasSuffix(f.Reason, "XCPD-BODY") {
				t.Fatalf("%d %s", a.status, a.body)
			}
		})
	}
}

// depth is the deepest nesting of a document's elements, read token by token.
func depth(t *testing.T, body []byte) int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(body))
	n, deepest := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return deepest
		}
		if err != nil {
			t.Fatal(err)
		}
		switch tok.(type) {
		case xml.StartElement:
			n++
			deepest = max(deepest, n)
		case xml.EndElement:
			n--
		}
	}
}

func TestHostile(t *testing.T) {
	t.Run("the entity bomb: ten entities, each ten of the one before, the marker at the bottom", func(t *testing.T) {
		s := respondinggateway.Start(t, respondinggateway.Options{Entries: entries, Hostile: respondinggateway.HostileEntityBomb})
		a := post(t, s.URL, soap12, envelope(query(mpi, "P1", "")))
		if a.status != 200 || len(a.body) > 4096 {
			t.Fatalf("%d, %d bytes", a.status, len(a.body))
		}
		body := string(a.body)
		if !strings.Contains(body, `<!ENTITY lol0 "XCPD-BODY">`) || !strings.Contains(body, "<text>&lol9;</text>") {
			t.Fatalf("%s", body)
		}
		for i := 1; i <= 9; i++ {
			decl := fmt.Sprintf(`<!ENTITY lol%d "%s">`, i, strings.Repeat(fmt.Sprintf("&lol%d;", i-1), 10))
			if !strings.Contains(body, decl) {
				t.Fatalf("no %s", decl)
			}
		}
		// Go's decoder expands no DTD entity: the bomb is an unknown entity to it.
		var v soapAnswer
		if err := xml.Unmarshal(a.body, &v); err == nil || !strings.Contains(err.Error(), "lol9") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("10,000 nested elements in an otherwise valid answer", func(t *testing.T) {
		s := respondinggateway.Start(t, respondinggateway.Options{Entries: entries, Hostile: respondinggateway.HostileDeep})
		a := post(t, s.URL, soap12, envelope(query(mpi, "P1", "")))
		// Envelope, Body, PRPA_IN201306UV02, controlActProcess, then the nesting.
		if got := depth(t, a.body); a.status != 200 || got != 4+respondinggateway.DeepNesting {
			t.Fatalf("%d, depth %d", a.status, got)
		}
		if !bytes.Contains(a.body, []byte("XCPD-BODY")) {
			t.Fatal("no marker")
		}
	})
	if _, err := respondinggateway.New(respondinggateway.Options{Hostile: "zip"}); err == nil {
		t.Fatal("took an unknown hostile body")
	}
}

func TestKnobs(t *testing.T) {
	good := envelope(query(mpi, "P1", ""))
	for _, tc := range []struct {
		status int
		code   string
	}{{503, "env:Receiver"}, {403, "env:Sender"}} {
		t.Run(fmt.Sprintf("status %d is a %s fault with the marker", tc.status, tc.code), func(t *testing.T) {
			s := respondinggateway.Start(t, respondinggateway.Options{Entries: entries, Knobs: double.Knobs{Status: tc.status}})
			a := post(t, s.URL, soap12, good)
			if f := read(t, a).Body.Fault; a.status != tc.status || f == nil || f.Code != tc.code || !strings.HasSuffix(f.Reason, "XCPD-BODY") {
				t.Fatalf("%d %s", a.status, a.body)
			}
		})
	}
	t.Run("malformed is a 200 no XML reader takes", func(t *testing.T) {
		s := respondinggateway.Start(t, respondinggateway.Options{Knobs: double.Knobs{Fault: double.FaultMalformed}})
		a := post(t, s.URL, soap12, good)
		var v soapAnswer
		if a.status != 200 || xml.Unmarshal(a.body, &v) == nil || !bytes.Contains(a.body, []byte("XCPD-BODY")) {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
	t.Run("refused, hang, reset", func(t *testing.T) {
		s := respondinggateway.Start(t, respondinggateway.Options{Entries: entries, Knobs: double.Knobs{Fault: double.FaultRefused}})
		c := &http.Client{Timeout: 100 * time.Millisecond}
		try := func() error {
			resp, err := c.Post(s.URL, soap12, strings.NewReader(good))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			return err
		}
		if err := try(); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("refused: %v", err)
		}
		for _, f := range []double.Fault{double.FaultHang, double.FaultReset} {
			if err := s.SetKnobs(double.Knobs{Fault: f}); err != nil {
				t.Fatal(err)
			}
			if err := try(); err == nil {
				t.Fatalf("%s: a whole answer", f)
			}
		}
	})
	if _, err := respondinggateway.New(respondinggateway.Options{Communities: map[string]respondinggateway.Case{"x": "maybe"}}); err == nil {
		t.Fatal("took an unknown case")
	}
}
