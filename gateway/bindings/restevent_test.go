package bindings_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// A RESTEvent is a valid R4 AuditEvent of BALP's profile for its interaction, with the
// gateway and the peer in the roles the direction gives them.
func TestARESTEventOfEachInteraction(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name                    string
		ev                      bindings.RESTEvent
		profile, action, role   string
		sourceIsPeer, withQuery bool
		subtypes                int
	}{
		{"a create with its transaction", bindings.RESTEvent{Interaction: bindings.InteractionCreate, Transaction: "ITI-94", TransactionDisplay: "Subscribe to Patient Updates", What: "Subscription"},
			"IHE.BasicAudit.Create", "C", "4", false, false, 2},
		{"a search", bindings.RESTEvent{Interaction: bindings.InteractionSearch, What: "Subscription", Query: []byte("url=http%3A%2F%2Fgw")},
			"IHE.BasicAudit.Query", "E", "24", false, true, 1},
		{"an update of a member's copy", bindings.RESTEvent{Interaction: bindings.InteractionUpdate, What: "OperationDefinition/q"},
			"IHE.BasicAudit.Update", "U", "4", false, false, 1},
		{"a read", bindings.RESTEvent{Interaction: bindings.InteractionRead, What: "Subscription/1"}, "IHE.BasicAudit.Read", "R", "4", false, false, 1},
		{"a delete", bindings.RESTEvent{Interaction: bindings.InteractionDelete, What: "Subscription/1"}, "IHE.BasicAudit.Delete", "D", "4", false, false, 1},
		{"an inbound message", bindings.RESTEvent{Interaction: bindings.InteractionOperation, What: "msg-1", Inbound: true}, "IHE.BasicAudit.Update", "U", "4", true, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Time, tc.ev.PeerSystem, tc.ev.PeerValue = at, bindings.ServiceSystem, "identity_registry"
			body, err := tc.ev.Event()
			if err != nil {
				t.Fatal(err)
			}
			if err := fhirschema.Validate(body); err != nil {
				t.Fatalf("not valid R4: %v\n%s", err, body)
			}
			var ev struct {
				Meta    struct{ Profile []string }
				Subtype []struct{ Code string }
				Action  string
				Outcome string
				Agent   []struct {
					Who struct {
						Identifier *struct{ System, Value string }
						Display    string
					}
					Requestor bool
				}
				Entity []struct {
					What  struct{ Display string }
					Role  struct{ Code string }
					Query string
				}
			}
			if err := json.Unmarshal(body, &ev); err != nil {
				t.Fatal(err)
			}
			if len(ev.Meta.Profile) != 1 || ev.Meta.Profile[0] != "https://profiles.ihe.net/ITI/BALP/StructureDefinition/"+tc.profile {
				t.Errorf("profile %v, want %s", ev.Meta.Profile, tc.profile)
			}
			if ev.Action != tc.action || ev.Outcome != "0" || len(ev.Subtype) != tc.subtypes || ev.Subtype[0].Code != tc.ev.Interaction {
				t.Errorf("action %q outcome %q subtypes %+v", ev.Action, ev.Outcome, ev.Subtype)
			}
			if len(ev.Agent) != 2 {
				t.Fatalf("%d agents", len(ev.Agent))
			}
			source, destination := ev.Agent[0], ev.Agent[1]
			if tc.sourceIsPeer {
				source, destination = destination, source
			}
			if source.Who.Display != "ferrofed gateway" || destination.Who.Identifier == nil || destination.Who.Identifier.Value != "identity_registry" {
				t.Errorf("agents %+v", ev.Agent)
			}
			if ev.Agent[0].Requestor != true || ev.Agent[1].Requestor != false {
				t.Errorf("the source is not the requestor: %+v", ev.Agent)
			}
			if len(ev.Entity) != 1 || ev.Entity[0].What.Display != tc.ev.What || ev.Entity[0].Role.Code != tc.role {
				t.Fatalf("entity %+v", ev.Entity)
			}
			if tc.withQuery && ev.Entity[0].Query != base64.StdEncoding.EncodeToString(tc.ev.Query) {
				t.Errorf("query %q", ev.Entity[0].Query)
			}
		})
	}
	for _, bad := range []bindings.RESTEvent{
		{Interaction: "patch", What: "x", PeerValue: "p"},
		{Interaction: bindings.InteractionRead, PeerValue: "p"},
		{Interaction: bindings.InteractionRead, What: "x"},
	} {
		if _, err := bad.Event(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
