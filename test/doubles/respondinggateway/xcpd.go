// Package xcpd is an IHE XCPD Responding Gateway for tests: a real HTTP server on
// loopback that answers Cross Gateway Patient Discovery [ITI-55], synchronous, SOAP
// 1.2 over HTTP: a `POST` of `application/soap+xml` whose WS-Addressing Action is
// `urn:hl7-org:v3:PRPA_IN201305UV02:CrossGatewayPatientDiscovery` and whose body is a
// PRPA_IN201305UV02, answered with a PRPA_IN201306UV02 (Action
// `urn:hl7-org:v3:PRPA_IN201306UV02:CrossGatewayPatientDiscovery`, RelatesTo the
// request's MessageID) in the cases of ITI TF-2 §3.55.4.2.3:
//
//	case 1/2  AA, OK, one registrationEvent per record found, its custodian the
//	          holding community's homeCommunityId and its patient the community's id
//	case 3    AA, OK, no registrationEvent, a DetectedIssueEvent naming the attributes
//	          requested (codes of 1.3.6.1.4.1.19376.1.2.27.1)
//	case 4    AA, NF
//	case 5    AE, AE, an acknowledgementDetail (ResponderBusy, …) carrying the marker
//	fault     a SOAP 1.2 Receiver fault with 500, or a Sender fault with 400
//
// The patient is found by its livingSubjectId values, else by the demographics
// (family, given, birth time, gender). When the request names its receiver
// community (receiver/device/asAgent/representedOrganization/id), only that
// community's records are answered, and Communities may set what that community
// answers. A request that is not SOAP 1.2, has another Action, or is no
// PRPA_IN201305UV02 is a Sender fault (400), 415 for another media type.
//
// For the hostile-input tests of a binding, Hostile answers 200 with an entity
// expansion bomb ("billion laughs", its entities expanding to the marker) or with
// 10,000 nested elements inside an otherwise valid answer. The knobs of test/double
// apply; a status of 400 or more is a SOAP fault carrying the marker.
package respondinggateway

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
)

// The WS-Addressing actions and the namespaces of ITI-55.
const (
	RequestAction  = "urn:hl7-org:v3:PRPA_IN201305UV02:CrossGatewayPatientDiscovery"
	ResponseAction = "urn:hl7-org:v3:PRPA_IN201306UV02:CrossGatewayPatientDiscovery"
	SOAPNamespace  = "http://www.w3.org/2003/05/soap-envelope"
	WSANamespace   = "http://www.w3.org/2005/08/addressing"
	HL7Namespace   = "urn:hl7-org:v3"
	FaultAction    = "http://www.w3.org/2005/08/addressing/soap/fault"
)

// Code systems of the XCPD codes.
const (
	MoreAttributesSystem = "1.3.6.1.4.1.19376.1.2.27.1"
	ErrorCodeSystem      = "1.3.6.1.4.1.19376.1.2.27.3"
)

// Case is what the gateway answers for a patient or a community.
type Case string

const (
	// CaseAuto answers case 1/2 when records are found, case 4 otherwise.
	CaseAuto Case = ""
	// CaseMatch is case 1/2: what CaseAuto resolves to when records are found.
	CaseMatch Case = "match"
	// CaseMoreAttributes is case 3.
	CaseMoreAttributes Case = "more-attributes"
	// CaseNoMatch is case 4 even with records.
	CaseNoMatch Case = "no-match"
	// CaseError is case 5 (AE).
	CaseError Case = "error"
	// CaseReceiverFault is a SOAP Receiver fault with HTTP 500.
	CaseReceiverFault Case = "receiver-fault"
	// CaseSenderFault is a SOAP Sender fault with HTTP 400.
	CaseSenderFault Case = "sender-fault"
)

// Hostile is a body no binding may parse whole.
type Hostile string

const (
	// HostileNone answers normally.
	HostileNone Hostile = ""
	// HostileEntityBomb is a DOCTYPE of ten entities each ten times the one before
	// ("billion laughs"), the answer's text its last one.
	HostileEntityBomb Hostile = "entity-bomb"
	// HostileDeep is a valid answer with 10,000 nested elements in its body.
	HostileDeep Hostile = "deep"
)

// DeepNesting is how deep HostileDeep nests.
const DeepNesting = 10000

// II is an HL7v3 instance identifier.
type II struct {
	Root      string `xml:"root,attr"`
	Extension string `xml:"extension,attr"`
}

// Person is the demographics of a patient (birth time YYYYMMDD, gender M or F).
type Person struct {
	Given, Family, Gender, BirthTime string
}

// Record is one community's record of the patient: one registrationEvent.
type Record struct {
	HomeCommunityID string
	Patient         II
}

// Entry is one patient the gateway can find.
type Entry struct {
	// IDs are the patient's ids a query's livingSubjectId names it by.
	IDs []II
	// Person is found by a query without ids, and answered in patientPerson.
	Person Person
	// Records are the communities' records of the patient.
	Records []Record
	// Case, when set, is what the gateway answers for this patient.
	Case Case
	// Requested are case 3's codes; default LivingSubjectAdministrativeGenderRequested.
	Requested []string
	// ErrorCode is case 5's code; default ResponderBusy.
	ErrorCode string
}

// Options shape one gateway.
type Options struct {
	// Listen is the address; default "127.0.0.1:0".
	Listen string
	// HomeCommunityID is the gateway's own, in the answer's sender; default
	// "urn:oid:1.2.3.4.999" without the urn:oid: prefix, as HL7v3 writes it.
	HomeCommunityID string
	// Entries are the patients.
	Entries []Entry
	// Communities set what a community answers when a request names it as receiver.
	Communities map[string]Case
	// Hostile answers every request with a hostile body.
	Hostile Hostile
	// Marker is put in every fault, error detail, malformed and hostile body;
	// default "XCPD-BODY".
	Marker string
	// Knobs are the faults the gateway starts with (test/double).
	Knobs double.Knobs
}

// Server is one running gateway.
type Server struct {
	*double.Server
	// URL is the gateway's ITI-55 endpoint, e.g. "http://127.0.0.1:40123/xcpd".
	URL string

	opts Options
	seq  atomic.Int64
}

// Path is the endpoint's path.
const Path = "/xcpd"

// Start starts a gateway for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("start xcpd gateway: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a gateway; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Marker == "" {
		opts.Marker = "XCPD-BODY"
	}
	if opts.HomeCommunityID == "" {
		opts.HomeCommunityID = "1.2.3.4.999"
	}
	switch opts.Hostile {
	case HostileNone, HostileEntityBomb, HostileDeep:
	default:
		return nil, fmt.Errorf("xcpd: hostile %q is not entity-bomb or deep", opts.Hostile)
	}
	for c, k := range opts.Communities {
		if !validCase(k) {
			return nil, fmt.Errorf("xcpd: communities[%s]: unknown case %q", c, k)
		}
	}
	for i, e := range opts.Entries {
		if !validCase(e.Case) {
			return nil, fmt.Errorf("xcpd: entries[%d]: unknown case %q", i, e.Case)
		}
	}
	s := &Server{opts: opts}
	ds, err := double.New(double.Options{Listen: opts.Listen, Name: "xcpd gateway", Marker: opts.Marker, Knobs: opts.Knobs}, s)
	if err != nil {
		return nil, err
	}
	s.Server = ds
	s.URL = ds.URL() + Path
	return s, nil
}

func validCase(c Case) bool {
	return slices.Contains([]Case{CaseAuto, CaseMatch, CaseMoreAttributes, CaseNoMatch, CaseError, CaseReceiverFault, CaseSenderFault}, c)
}

// Request is what the gateway reads of a PRPA_IN201305UV02 in its envelope. Elements
// are matched by local name, so any prefixes the sender binds are taken.
type Request struct {
	XMLName xml.Name
	Header  struct {
		Action    string `xml:"Action"`
		MessageID string `xml:"MessageID"`
	} `xml:"Header"`
	Body struct {
		Query *Query `xml:"PRPA_IN201305UV02"`
	} `xml:"Body"`
}

// Query is the PRPA_IN201305UV02.
type Query struct {
	ID       II     `xml:"id"`
	Receiver device `xml:"receiver>device"`
	Sender   device `xml:"sender>device"`
	Params   struct {
		QueryID II `xml:"queryId"`
		List    struct {
			Gender []struct {
				Value struct {
					Code string `xml:"code,attr"`
				} `xml:"value"`
			} `xml:"livingSubjectAdministrativeGender"`
			BirthTime []struct {
				Value struct {
					Value string `xml:"value,attr"`
				} `xml:"value"`
			} `xml:"livingSubjectBirthTime"`
			IDs []struct {
				Value []II `xml:"value"`
			} `xml:"livingSubjectId"`
			Names []struct {
				Value []struct {
					Given  []string `xml:"given"`
					Family []string `xml:"family"`
				} `xml:"value"`
			} `xml:"livingSubjectName"`
		} `xml:"parameterList"`
	} `xml:"controlActProcess>queryByParameter"`
}

type device struct {
	ID              II `xml:"id"`
	HomeCommunityID II `xml:"asAgent>representedOrganization>id"`
}

// Answer answers one request.
func (s *Server) Answer(r double.Request) double.Answer {
	if r.Path != Path {
		return s.fault(http.StatusNotFound, "Sender", "no ITI-55 endpoint at "+r.Path)
	}
	if r.Method != http.MethodPost {
		return s.fault(http.StatusMethodNotAllowed, "Sender", "ITI-55 is a POST")
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/soap+xml" {
		return s.fault(http.StatusUnsupportedMediaType, "Sender", "Content-Type must be application/soap+xml (SOAP 1.2)")
	}
	var req Request
	if err := xml.Unmarshal(r.Body, &req); err != nil {
		return s.fault(http.StatusBadRequest, "Sender", "the body is not XML: "+err.Error())
	}
	switch {
	case req.XMLName.Space != SOAPNamespace || req.XMLName.Local != "Envelope":
		return s.fault(http.StatusBadRequest, "Sender", "the body is not a SOAP 1.2 Envelope")
	case strings.TrimSpace(req.Header.Action) != RequestAction || (params["action"] != "" && params["action"] != RequestAction):
		return s.fault(http.StatusBadRequest, "Sender", "wsa:ActionNotSupported: the Action must be "+RequestAction)
	case req.Body.Query == nil:
		return s.fault(http.StatusBadRequest, "Sender", "the Body holds no PRPA_IN201305UV02")
	}
	if s.opts.Hostile != HostileNone {
		return s.hostile()
	}
	res := s.Find(*req.Body.Query)
	switch res.Case {
	case CaseReceiverFault:
		return s.fault(http.StatusInternalServerError, "Receiver", "the responding gateway failed")
	case CaseSenderFault:
		return s.fault(http.StatusBadRequest, "Sender", "the responding gateway refused the request")
	}
	return s.soap(http.StatusOK, s.response(req, res))
}

// Result is what the gateway found for a query.
type Result struct {
	Case      Case // never CaseAuto: resolved to CaseMatch or CaseNoMatch
	Matches   []Match
	Requested []string
	ErrorCode string
}

// Match is one registrationEvent of an answer.
type Match struct {
	Record Record
	Person Person
}

// Find is the gateway's matching: the entries the query names, their records in the
// receiver's community (all without one), and the case to answer.
func (s *Server) Find(q Query) Result {
	var ids []II
	for _, p := range q.Params.List.IDs {
		ids = append(ids, p.Value...)
	}
	community := q.Receiver.HomeCommunityID.Root
	if community == s.opts.HomeCommunityID {
		community = ""
	}
	var res Result
	for _, e := range s.opts.Entries {
		if !s.names(q, ids, e) {
			continue
		}
		if e.Case != CaseAuto && e.Case != CaseMatch && res.Case == CaseAuto {
			res.Case, res.Requested, res.ErrorCode = e.Case, e.Requested, e.ErrorCode
		}
		for _, r := range e.Records {
			if community == "" || r.HomeCommunityID == community {
				res.Matches = append(res.Matches, Match{Record: r, Person: e.Person})
			}
		}
	}
	if c, ok := s.opts.Communities[community]; ok && community != "" && c != CaseAuto && c != CaseMatch {
		res.Case = c
	}
	if res.Case == CaseAuto {
		res.Case = CaseNoMatch
		if len(res.Matches) > 0 {
			res.Case = CaseMatch
		}
	}
	if res.Case != CaseMatch {
		res.Matches = nil
	}
	if res.Case == CaseMoreAttributes && len(res.Requested) == 0 {
		res.Requested = []string{"LivingSubjectAdministrativeGenderRequested"}
	}
	if res.Case == CaseError && res.ErrorCode == "" {
		res.ErrorCode = "ResponderBusy"
	}
	return res
}

// names reports whether a query names an entry: by one of its ids when the query
// has ids, else by every demographic the query gives.
func (s *Server) names(q Query, ids []II, e Entry) bool {
	if len(ids) > 0 {
		return slices.ContainsFunc(ids, func(id II) bool { return slices.Contains(e.IDs, id) })
	}
	l := q.Params.List
	if len(l.Names) == 0 && len(l.BirthTime) == 0 && len(l.Gender) == 0 {
		return false
	}
	for _, n := range l.Names {
		for _, v := range n.Value {
			if len(v.Family) > 0 && !strings.EqualFold(strings.TrimSpace(v.Family[0]), e.Person.Family) {
				return false
			}
			if len(v.Given) > 0 && !strings.EqualFold(strings.TrimSpace(v.Given[0]), e.Person.Given) {
				return false
			}
		}
	}
	for _, b := range l.BirthTime {
		if !strings.HasPrefix(e.Person.BirthTime, b.Value.Value) {
			return false
		}
	}
	for _, g := range l.Gender {
		if g.Value.Code != e.Person.Gender {
			return false
		}
	}
	return true
}

// response is the PRPA_IN201306UV02 envelope of a result.
func (s *Server) response(req Request, res Result) []byte {
	q := req.Body.Query
	var b bytes.Buffer
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w(`<?xml version="1.0" encoding="UTF-8"?>`)
	w(`<env:Envelope xmlns:env="%s" xmlns:wsa="%s"><env:Header>`, SOAPNamespace, WSANamespace)
	w(`<wsa:Action env:mustUnderstand="1">%s</wsa:Action>`, ResponseAction)
	if req.Header.MessageID != "" {
		w(`<wsa:RelatesTo>%s</wsa:RelatesTo>`, esc(strings.TrimSpace(req.Header.MessageID)))
	}
	w(`</env:Header><env:Body>`)
	w(`<PRPA_IN201306UV02 xmlns="%s" ITSVersion="XML_1.0">`, HL7Namespace)
	w(`<id root="%s" extension="%d"/>`, esc(s.opts.HomeCommunityID), s.seq.Add(1))
	w(`<creationTime value="20260101000000"/>`)
	w(`<interactionId root="2.16.840.1.113883.1.6" extension="PRPA_IN201306UV02"/>`)
	w(`<processingCode code="P"/><processingModeCode code="T"/><acceptAckCode code="NE"/>`)
	w(`<receiver typeCode="RCV"><device classCode="DEV" determinerCode="INSTANCE">%s`, ii("id", q.Sender.ID))
	if q.Sender.HomeCommunityID.Root != "" {
		w(`<asAgent classCode="AGNT"><representedOrganization classCode="ORG" determinerCode="INSTANCE">%s</representedOrganization></asAgent>`, ii("id", q.Sender.HomeCommunityID))
	}
	w(`</device></receiver>`)
	w(`<sender typeCode="SND"><device classCode="DEV" determinerCode="INSTANCE">%s`, ii("id", q.Receiver.ID))
	w(`<asAgent classCode="AGNT"><representedOrganization classCode="ORG" determinerCode="INSTANCE"><id root="%s"/></representedOrganization></asAgent>`, esc(s.opts.HomeCommunityID))
	w(`</device></sender>`)
	ack, code := "AA", "OK"
	switch res.Case {
	case CaseNoMatch:
		code = "NF"
	case CaseError:
		ack, code = "AE", "AE"
	}
	w(`<acknowledgement><typeCode code="%s"/><targetMessage>%s</targetMessage>`, ack, ii("id", q.ID))
	if res.Case == CaseError {
		w(`<acknowledgementDetail typeCode="E"><code code="%s" codeSystem="%s"/><text>%s</text></acknowledgementDetail>`,
			esc(res.ErrorCode), ErrorCodeSystem, esc("the responding gateway cannot answer now "+s.opts.Marker))
	}
	w(`</acknowledgement>`)
	w(`<controlActProcess classCode="CACT" moodCode="EVN"><code code="PRPA_TE201306UV02" codeSystem="2.16.840.1.113883.1.6"/>`)
	for _, m := range res.Matches {
		w(`<subject typeCode="SUBJ" contextConductionInd="false"><registrationEvent classCode="REG" moodCode="EVN"><id nullFlavor="NA"/><statusCode code="active"/>`)
		w(`<subject1 typeCode="SBJ"><patient classCode="PAT">%s<statusCode code="active"/>`, ii("id", m.Record.Patient))
		w(`<patientPerson classCode="PSN" determinerCode="INSTANCE"><name><given>%s</given><family>%s</family></name>`, esc(m.Person.Given), esc(m.Person.Family))
		if m.Person.Gender != "" {
			w(`<administrativeGenderCode code="%s"/>`, esc(m.Person.Gender))
		}
		if m.Person.BirthTime != "" {
			w(`<birthTime value="%s"/>`, esc(m.Person.BirthTime))
		}
		w(`</patientPerson></patient></subject1>`)
		w(`<custodian typeCode="CST"><assignedEntity classCode="ASSIGNED"><id root="%s"/>`, esc(m.Record.HomeCommunityID))
		w(`<code code="NotHealthDataLocator" codeSystem="1.3.6.1.4.1.19376.1.2.27.2"/></assignedEntity></custodian>`)
		w(`</registrationEvent></subject>`)
	}
	if res.Case == CaseMoreAttributes {
		w(`<reasonOf typeCode="RSON"><detectedIssueEvent classCode="ALRT" moodCode="EVN"><code code="ActAdministrativeDetectedIssueCode" codeSystem="2.16.840.1.113883.5.4"/>`)
		for _, c := range res.Requested {
			w(`<triggerFor typeCode="TRIG"><actOrderRequired classCode="ACT" moodCode="RQO"><code code="%s" codeSystem="%s"/></actOrderRequired></triggerFor>`, esc(c), MoreAttributesSystem)
		}
		w(`</detectedIssueEvent></reasonOf>`)
	}
	w(`<queryAck>%s<queryResponseCode code="%s"/></queryAck>`, ii("queryId", q.Params.QueryID), code)
	w(`<queryByParameter>%s<statusCode code="new"/><responseModalityCode code="R"/><responsePriorityCode code="I"/><parameterList>`, ii("queryId", q.Params.QueryID))
	l := q.Params.List
	for _, g := range l.Gender {
		w(`<livingSubjectAdministrativeGender><value code="%s"/><semanticsText>LivingSubject.administrativeGender</semanticsText></livingSubjectAdministrativeGender>`, esc(g.Value.Code))
	}
	for _, bt := range l.BirthTime {
		w(`<livingSubjectBirthTime><value value="%s"/><semanticsText>LivingSubject.birthTime</semanticsText></livingSubjectBirthTime>`, esc(bt.Value.Value))
	}
	for _, p := range l.IDs {
		for _, v := range p.Value {
			w(`<livingSubjectId>%s<semanticsText>LivingSubject.id</semanticsText></livingSubjectId>`, ii("value", v))
		}
	}
	for _, n := range l.Names {
		for _, v := range n.Value {
			w(`<livingSubjectName><value>`)
			for _, g := range v.Given {
				w(`<given>%s</given>`, esc(g))
			}
			for _, f := range v.Family {
				w(`<family>%s</family>`, esc(f))
			}
			w(`</value><semanticsText>LivingSubject.name</semanticsText></livingSubjectName>`)
		}
	}
	w(`</parameterList></queryByParameter></controlActProcess></PRPA_IN201306UV02></env:Body></env:Envelope>`)
	return b.Bytes()
}

// hostile is a 200 of the hostile body the options name.
func (s *Server) hostile() double.Answer {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>`)
	if s.opts.Hostile == HostileEntityBomb {
		fmt.Fprintf(&b, `<!DOCTYPE env:Envelope [<!ENTITY lol0 "%s">`, esc(s.opts.Marker))
		for i := 1; i <= 9; i++ {
			fmt.Fprintf(&b, `<!ENTITY lol%d "%s">`, i, strings.Repeat(fmt.Sprintf("&lol%d;", i-1), 10))
		}
		b.WriteString(`]>`)
	}
	fmt.Fprintf(&b, `<env:Envelope xmlns:env="%s" xmlns:wsa="%s"><env:Header><wsa:Action>%s</wsa:Action></env:Header><env:Body>`, SOAPNamespace, WSANamespace, ResponseAction)
	fmt.Fprintf(&b, `<PRPA_IN201306UV02 xmlns="%s" ITSVersion="XML_1.0"><acknowledgement><typeCode code="AA"/></acknowledgement><controlActProcess classCode="CACT" moodCode="EVN">`, HL7Namespace)
	if s.opts.Hostile == HostileEntityBomb {
		b.WriteString(`<text>&lol9;</text>`)
	} else {
		b.WriteString(strings.Repeat("<subject>", DeepNesting))
		b.WriteString(esc(s.opts.Marker))
		b.WriteString(strings.Repeat("</subject>", DeepNesting))
	}
	b.WriteString(`<queryAck><queryResponseCode code="OK"/></queryAck></controlActProcess></PRPA_IN201306UV02></env:Body></env:Envelope>`)
	return double.Answer{Status: http.StatusOK, ContentType: "application/soap+xml; charset=utf-8", Body: b.Bytes()}
}

// Error is the gateway's error answer: a SOAP fault, Receiver from 500 on.
func (s *Server) Error(status int, text string) double.Answer {
	code := "Sender"
	if status >= 500 {
		code = "Receiver"
	}
	return s.fault(status, code, text)
}

// Malformed is a 200 whose body is an answer cut in the middle.
func (s *Server) Malformed() double.Answer {
	var req Request
	req.Body.Query = &Query{}
	body := s.response(req, Result{Case: CaseNoMatch})
	return double.Answer{Status: http.StatusOK, ContentType: "application/soap+xml; charset=utf-8", Body: double.Truncated(body, s.opts.Marker)}
}

// fault is a SOAP 1.2 fault of code Sender or Receiver; its Reason carries the marker.
func (s *Server) fault(status int, code, text string) double.Answer {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="%s" xmlns:wsa="%s"><env:Header><wsa:Action>%s</wsa:Action></env:Header><env:Body><env:Fault><env:Code><env:Value>env:%s</env:Value></env:Code><env:Reason><env:Text xml:lang="en">%s</env:Text></env:Reason></env:Fault></env:Body></env:Envelope>`,
		SOAPNamespace, WSANamespace, FaultAction, code, esc(text+" "+s.opts.Marker))
	return double.Answer{Status: status, ContentType: `application/soap+xml; charset=utf-8; action="` + FaultAction + `"`, Body: []byte(body)}
}

func (s *Server) soap(status int, body []byte) double.Answer {
	return double.Answer{Status: status, ContentType: `application/soap+xml; charset=utf-8; action="` + ResponseAction + `"`, Body: body}
}

func ii(name string, v II) string {
	if v.Extension == "" {
		return fmt.Sprintf(`<%s root="%s"/>`, name, esc(v.Root))
	}
	return fmt.Sprintf(`<%s root="%s" extension="%s"/>`, name, esc(v.Root), esc(v.Extension))
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
