package smart

// Interaction is a FHIR RESTful interaction, as far as SMART scopes tell them
// apart.
type Interaction uint8

// The interactions. Required says which permissions each needs.
const (
	// Read is GET [type]/[id].
	Read Interaction = iota + 1
	// VRead is GET [type]/[id]/_history/[vid].
	VRead
	// HistoryInstance is GET [type]/[id]/_history.
	HistoryInstance
	// HistoryType is GET [type]/_history.
	HistoryType
	// HistorySystem is GET /_history: every type.
	HistorySystem
	// SearchType is GET [type]?... or POST [type]/_search.
	SearchType
	// SearchSystem is GET /?...: every type (or those of _type, which a caller that
	// reads it can check one by one as SearchType).
	SearchSystem
	// Create is POST [type].
	Create
	// ConditionalCreate is POST [type] with If-None-Exist.
	ConditionalCreate
	// Update is PUT [type]/[id] (an update that creates is still an update).
	Update
	// ConditionalUpdate is PUT [type]?criteria.
	ConditionalUpdate
	// Patch is PATCH [type]/[id].
	Patch
	// ConditionalPatch is PATCH [type]?criteria.
	ConditionalPatch
	// Delete is DELETE [type]/[id].
	Delete
	// ConditionalDelete is DELETE [type]?criteria.
	ConditionalDelete
	// Capabilities is GET /metadata: always allowed, whatever the token holds.
	Capabilities
	// Transaction is POST / with a transaction or batch Bundle. SMART defines no
	// scope for it: it is decided entry by entry (FirstRefusal), and Allow refuses
	// the wrapper itself so that a caller that forgets the entries lets nothing through.
	Transaction
)

var interactionNames = map[Interaction]string{
	Read: "read", VRead: "vread", HistoryInstance: "history-instance", HistoryType: "history-type",
	HistorySystem: "history-system", SearchType: "search-type", SearchSystem: "search-system",
	Create: "create", ConditionalCreate: "conditional-create", Update: "update",
	ConditionalUpdate: "conditional-update", Patch: "patch", ConditionalPatch: "conditional-patch",
	Delete: "delete", ConditionalDelete: "conditional-delete", Capabilities: "capabilities",
	Transaction: "transaction",
}

// String is the interaction's name as FHIR's CapabilityStatement spells it
// (history-instance, search-type, ...; the conditional ones as
// conditional-create and so on).
func (i Interaction) String() string {
	if s, ok := interactionNames[i]; ok {
		return s
	}
	return "unknown"
}

// required is the permission table of SMART App Launch 2.x ("Scopes for requesting
// clinical data"), plus search for the conditional interactions, which SMART does
// not mention: each runs a search of the type on the client's criteria, and its
// answer (which resource it touched, whether one matched, 412 for several) tells
// the client what that search found. A token that may not search may not learn it.
var required = map[Interaction]Perm{
	Read:              PermRead,
	VRead:             PermRead,
	HistoryInstance:   PermRead,
	HistoryType:       PermSearch,
	HistorySystem:     PermSearch,
	SearchType:        PermSearch,
	SearchSystem:      PermSearch,
	Create:            PermCreate,
	ConditionalCreate: PermCreate | PermSearch,
	Update:            PermUpdate,
	ConditionalUpdate: PermUpdate | PermSearch,
	Patch:             PermUpdate,
	ConditionalPatch:  PermUpdate | PermSearch,
	Delete:            PermDelete,
	ConditionalDelete: PermDelete | PermSearch,
}

// Required returns the permissions an interaction needs on its resource type. It
// is none for Capabilities (always allowed) and for Transaction and unknown
// interactions, which Allow refuses however many permissions a token holds.
func Required(i Interaction) Perm { return required[i] }

// typeless reports whether the interaction names no resource type: system-level
// history and search, which only a wildcard grant covers.
func (i Interaction) typeless() bool { return i == HistorySystem || i == SearchSystem }
