package audit

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

type decoded struct {
	ResourceType string `json:"resourceType"`
	Meta         struct {
		Profile []string `json:"profile"`
	} `json:"meta"`
	Subtype []struct{ Code string } `json:"subtype"`
	Action  string                  `json:"action"`
	Agent   []struct {
		Type struct {
			Coding []struct{ Code string } `json:"coding"`
		} `json:"type"`
		Who struct {
			Display    string `json:"display"`
			Identifier struct {
				System, Value string
			} `json:"identifier"`
		} `json:"who"`
		Requestor bool `json:"requestor"`
		Network   struct {
			Address, Type string
		} `json:"network"`
	} `json:"agent"`
	Entity []struct {
		Query       string `json:"query"`
		Description string `json:"description"`
		What        struct {
			Display string `json:"display"`
		} `json:"what"`
	} `json:"entity"`
}

func TestEvent(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name        string
		a           Access
		wantSubtype string
		wantAction  string
		wantProfile string
		wantWho     string // subject, or "anonymous"
		wantQuery   string // decoded entity.query; "" for none
		wantMembers []string
	}{
		{"a federated search with a token is a BALP Query of its subject",
			Access{Kind: Search, Time: at, Method: "GET", Path: "/fhir/Patient", Query: "family=Smith&_count=5", ResourceType: "Patient",
				Issuer: "https://idp.example", Subject: "alice", ClientAddress: "127.0.0.1", Members: []string{"a", "b"}},
			"search", "E", ProfileQuery, "alice", "family=Smith&_count=5", []string{"a", "b"}},
		{"a federated search without a token is anonymous",
			Access{Kind: Search, Time: at, Method: "POST", Path: "/fhir/Observation/_search", Query: "code=1234-5", ClientAddress: "::1", Members: []string{"a"}},
			"search", "E", ProfileQuery, AnonymousSubject, "code=1234-5", []string{"a"}},
		{"a routed read names its one member",
			Access{Kind: Routed, Time: at, Method: "GET", Path: "/nodes/a/fhir/Patient/123", Members: []string{"a"}},
			"read", "R", ProfileRead, AnonymousSubject, "", []string{"a"}},
		{"a routed search keeps its query",
			Access{Kind: Routed, Time: at, Method: "GET", Path: "/nodes/b/fhir/Patient", Query: "name=x", Members: []string{"b"}},
			"search", "E", ProfileQuery, AnonymousSubject, "name=x", []string{"b"}},
		{"a routed create", Access{Kind: Routed, Time: at, Method: "POST", Path: "/nodes/a/fhir/Patient", Members: []string{"a"}},
			"create", "C", ProfileCreate, AnonymousSubject, "", []string{"a"}},
		{"a routed update", Access{Kind: Routed, Time: at, Method: "PUT", Path: "/nodes/a/fhir/Patient/1", Members: []string{"a"}},
			"update", "U", ProfileUpdate, AnonymousSubject, "", []string{"a"}},
		{"a routed delete", Access{Kind: Routed, Time: at, Method: "DELETE", Path: "/nodes/a/fhir/Patient/1", Members: []string{"a"}},
			"delete", "D", ProfileDelete, AnonymousSubject, "", []string{"a"}},
		{"a routed POST _search is a query",
			Access{Kind: Routed, Time: at, Method: "POST", Path: "/nodes/a/fhir/Patient/_search", Query: "gender=female", Members: []string{"a"}},
			"search", "E", ProfileQuery, AnonymousSubject, "gender=female", []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := Event(tc.a, Source{Observer: "gw-0", Site: "https://gw.example"}, "7c9e6679-7425-40de-944b-e07fc1f90ae7")
			if err != nil {
				t.Fatal(err)
			}
			if err := fhirschema.Validate(body); err != nil {
				t.Fatalf("not valid R4: %v\n%s", err, body)
			}
			again, _ := Event(tc.a, Source{Observer: "gw-0", Site: "https://gw.example"}, "7c9e6679-7425-40de-944b-e07fc1f90ae7")
			if string(again) != string(body) {
				t.Fatal("the same access gave other bytes: Event is not pure")
			}
			if id, ok := deliver.EventID(body); !ok || id != "7c9e6679-7425-40de-944b-e07fc1f90ae7" {
				t.Fatalf("event id tag %q, %v: deliver cannot read it back", id, ok)
			}
			var d decoded
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			if d.ResourceType != "AuditEvent" || d.Subtype[0].Code != tc.wantSubtype || d.Action != tc.wantAction || d.Meta.Profile[0] != tc.wantProfile {
				t.Fatalf("type %s subtype %v action %s profile %v", d.ResourceType, d.Subtype, d.Action, d.Meta.Profile)
			}
			req := d.Agent[0]
			who := req.Who.Identifier.Value
			if who == "" {
				who = req.Who.Display
			}
			if !req.Requestor || who != tc.wantWho || req.Type.Coding[0].Code != "110153" {
				t.Fatalf("requester %+v, want %s", req, tc.wantWho)
			}
			if tc.a.Subject != "" && req.Who.Identifier.System != tc.a.Issuer {
				t.Fatalf("the subject is not under its issuer: %+v", req.Who)
			}
			if tc.a.ClientAddress != "" && (req.Network.Address != tc.a.ClientAddress || req.Network.Type != "2") {
				t.Fatalf("network %+v", req.Network)
			}
			var members []string
			for _, ag := range d.Agent[2:] {
				if ag.Requestor || ag.Who.Identifier.System != MemberSystem {
					t.Fatalf("member agent %+v", ag)
				}
				members = append(members, ag.Who.Identifier.Value)
			}
			if len(members) != len(tc.wantMembers) {
				t.Fatalf("members %v, want %v", members, tc.wantMembers)
			}
			for i := range members {
				if members[i] != tc.wantMembers[i] {
					t.Fatalf("members %v, want %v", members, tc.wantMembers)
				}
			}
			q, err := base64.StdEncoding.DecodeString(d.Entity[0].Query)
			if err != nil || string(q) != tc.wantQuery {
				t.Fatalf("entity.query decodes to %q (%v), want %q", q, err, tc.wantQuery)
			}
			if tc.wantQuery == "" && d.Entity[0].What.Display != tc.a.Path {
				t.Fatalf("a request without a query does not name its path: %+v", d.Entity[0])
			}
		})
	}
}

func TestEventRefusesWhatIsNoAccess(t *testing.T) {
	if _, err := Event(Access{}, Source{}, "id"); err == nil {
		t.Fatal("an access of no kind was turned into an event")
	}
	if _, err := Event(Access{Kind: Search}, Source{}, ""); err == nil {
		t.Fatal("an event without an event id")
	}
}

func TestTheEventIDSystemIsDelivers(t *testing.T) {
	if EventIDSystem != deliver.EventIDSystem {
		t.Fatalf("%s != %s", EventIDSystem, deliver.EventIDSystem)
	}
}

// The reflective encoder Event replaced: its structs and its construction, kept as
// the reference Event's bytes are compared with.
type coding struct {
	System  string `json:"system"`
	Code    string `json:"code"`
	Display string `json:"display,omitempty"`
}

type codeable struct {
	Coding []coding `json:"coding"`
	Text   string   `json:"text,omitempty"`
}

type identifier struct {
	System string `json:"system,omitempty"`
	Value  string `json:"value"`
}

type reference struct {
	Identifier *identifier `json:"identifier,omitempty"`
	Display    string      `json:"display,omitempty"`
}

type network struct {
	Address string `json:"address"`
	Type    string `json:"type"`
}

type agent struct {
	Type      *codeable  `json:"type,omitempty"`
	Who       *reference `json:"who,omitempty"`
	Requestor bool       `json:"requestor"`
	Network   *network   `json:"network,omitempty"`
}

type entity struct {
	What        *reference `json:"what,omitempty"`
	Type        *coding    `json:"type,omitempty"`
	Role        *coding    `json:"role,omitempty"`
	Description string     `json:"description,omitempty"`
	Query       string     `json:"query,omitempty"`
}

type source struct {
	Site     string     `json:"site,omitempty"`
	Observer *reference `json:"observer"`
	Type     []coding   `json:"type"`
}

type meta struct {
	Profile []string `json:"profile"`
	Tag     []coding `json:"tag,omitempty"`
}

type auditEvent struct {
	ResourceType string   `json:"resourceType"`
	Meta         meta     `json:"meta"`
	Type         coding   `json:"type"`
	Subtype      []coding `json:"subtype"`
	Action       string   `json:"action"`
	Recorded     string   `json:"recorded"`
	Agent        []agent  `json:"agent"`
	Source       source   `json:"source"`
	Entity       []entity `json:"entity"`
}

func eventReflect(a Access, src Source, eventID string) ([]byte, error) {
	code, action, profile := interaction(a)
	observer := src.Observer
	if observer == "" {
		observer = "ferrofed"
	}
	who := &reference{Display: AnonymousSubject}
	if a.Subject != "" {
		who = &reference{Identifier: &identifier{System: a.Issuer, Value: a.Subject}}
	}
	requester := agent{
		Type:      &codeable{Coding: []coding{{System: systemDCM, Code: "110153", Display: "Source Role ID"}}},
		Who:       who,
		Requestor: true,
	}
	if a.ClientAddress != "" {
		requester.Network = &network{Address: a.ClientAddress, Type: networkType(a.ClientAddress)}
	}
	agents := []agent{requester, {
		Type:      &codeable{Coding: []coding{{System: systemDCM, Code: "110150", Display: "Application"}}},
		Who:       &reference{Display: "ferrofed gateway " + observer},
		Requestor: false,
	}}
	for _, m := range a.Members {
		agents = append(agents, agent{
			Type:      &codeable{Coding: []coding{{System: systemDCM, Code: "110152", Display: "Destination Role ID"}}},
			Who:       &reference{Identifier: &identifier{System: MemberSystem, Value: m}},
			Requestor: false,
		})
	}
	q := entity{
		Type:        &coding{System: systemEntityType, Code: "2", Display: "System Object"},
		Role:        &coding{System: systemObjectRole, Code: "24", Display: "Query"},
		Description: a.Method + " " + a.Path,
		Query:       base64.StdEncoding.EncodeToString([]byte(a.Query)),
	}
	if a.Query == "" {
		q.Query = ""
		q.What = &reference{Display: a.Path}
		q.Role = &coding{System: systemObjectRole, Code: "4", Display: "Domain Resource"}
	}
	ev := auditEvent{
		ResourceType: "AuditEvent",
		Meta:         meta{Profile: []string{profile}, Tag: []coding{{System: EventIDSystem, Code: eventID}}},
		Type:         coding{System: systemEventType, Code: "rest", Display: "Restful Operation"},
		Subtype:      []coding{{System: systemInteraction, Code: code}},
		Action:       action,
		Recorded:     a.Time.UTC().Format(time.RFC3339Nano),
		Agent:        agents,
		Source: source{
			Site:     src.Site,
			Observer: &reference{Display: observer},
			Type:     []coding{{System: systemSourceType, Code: "4", Display: "Application Server"}},
		},
		Entity: []entity{q},
	}
	return json.Marshal(ev)
}

// TestEventBytesAreEncodingJSONs: the appending encoder writes the bytes the
// reflective one wrote, escaping included, for every field that takes a value.
func TestEventBytesAreEncodingJSONs(t *testing.T) {
	odd := []string{"", "plain", "a\"b", `back\slash`, "<script>&amp;", "tab\tnew\nline\r\b\f\x00\x1f\x7f",
		"é ü 日本", "\u2028\u2029", "\xff\xfe invalid", "key=v&x=<y>", "%2F/+=", " "}
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	n := 0
	for _, kind := range []Kind{Search, Routed} {
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			for i, v := range odd {
				w := odd[(i+3)%len(odd)]
				for _, a := range []Access{
					{Kind: kind, Time: at, Method: method, Path: "/nodes/a/fhir/Patient/" + v, Query: v, Issuer: w, Subject: v, ClientAddress: w, Members: []string{v, w, "a"}},
					{Kind: kind, Time: at.Add(time.Duration(i) * time.Second), Method: method, Path: "/fhir/" + w, Query: w, Subject: w, ClientAddress: v},
					{Kind: kind, Method: method, Path: v},
				} {
					for _, src := range []Source{{}, {Observer: v, Site: w}, {Observer: "gw-0", Site: "https://gw.example"}} {
						id := "7c9e6679-7425-40de-944b-e07fc1f90ae7"
						if v != "" {
							id = v
						}
						got, err := Event(a, src, id)
						if err != nil {
							t.Fatal(err)
						}
						want, _ := eventReflect(a, src, id)
						if string(got) != string(want) {
							t.Fatalf("%+v %+v:\n got %s\nwant %s", a, src, got, want)
						}
						n++
					}
				}
			}
		}
	}
	t.Logf("%d events compared", n)
}

func BenchmarkEvent(b *testing.B) {
	a := Access{Kind: Search, Time: time.Now(), Method: "GET", Path: "/fhir/Patient", Query: "name=BENCH123456", ClientAddress: "127.0.0.1", Members: []string{"a"}}
	src := Source{Observer: "gw-0"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Event(a, src, "7c9e6679-7425-40de-944b-e07fc1f90ae7"); err != nil {
			b.Fatal(err)
		}
	}
}

// A data-plane token's caller is in the evidence as BALP has it: the requester with its
// fhirUser and the scopes the token was used with, and its client application as an
// agent of its own, under the token's issuer.
func TestTheEventNamesTheClientAndItsScopes(t *testing.T) {
	a := Access{Kind: Search, Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Method: "GET", Path: "/fhir/Observation",
		Query: "code=x", ResourceType: "Observation", Issuer: "https://idp.example", Subject: "u-17", FHIRUser: "Practitioner/42",
		ClientID: "ward-app", Scopes: []string{"user/Observation.rs", "openid"}, Members: []string{"a"}}
	body, err := Event(a, Source{Observer: "gw-0"}, "7c9e6679-7425-40de-944b-e07fc1f90ae7")
	if err != nil {
		t.Fatal(err)
	}
	if err := fhirschema.Validate(body); err != nil {
		t.Fatalf("not valid R4: %v\n%s", err, body)
	}
	var d struct {
		Agent []struct {
			Extension []struct{ URL, ValueString string }
			Type      struct{ Coding []struct{ Code string } }
			Who       struct {
				Reference  string
				Identifier struct{ System, Value string }
			}
			Requestor bool
		}
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	req, client := d.Agent[0], d.Agent[1]
	if !req.Requestor || req.Who.Reference != "Practitioner/42" || req.Who.Identifier.Value != "u-17" ||
		len(req.Extension) != 1 || req.Extension[0].URL != ScopesExtension || req.Extension[0].ValueString != "user/Observation.rs openid" {
		t.Fatalf("requester %+v", req)
	}
	if client.Requestor || client.Type.Coding[0].Code != "110150" || client.Who.Identifier.Value != "ward-app" || client.Who.Identifier.System != "https://idp.example" {
		t.Fatalf("client %+v", client)
	}
	if len(d.Agent) != 4 {
		t.Fatalf("%d agents, want the requester, its client, the gateway and one member", len(d.Agent))
	}
}
