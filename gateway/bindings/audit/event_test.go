package audit

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/test/members/fhirschema"
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
