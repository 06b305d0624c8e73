package storedquery

import (
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
)

// The RESTful interactions of the stored queries' member exchanges.
const (
	interactionUpdate = bindings.InteractionUpdate
	interactionRead   = bindings.InteractionRead
	interactionDelete = bindings.InteractionDelete
)

// memberEvent is one exchange of a stored query with a member to audit: the PUT of a
// distribution or a repair, the read of a drift check or a repair, the DELETE of a
// withdrawal. The member is the destination agent, OperationDefinition/{query} the
// entity.
func memberEvent(interaction string, start time.Time, member, query, outcome string) bindings.RESTEvent {
	return bindings.RESTEvent{Interaction: interaction, Time: start, What: "OperationDefinition/" + query,
		Outcome: outcome, PeerSystem: audit.MemberSystem, PeerValue: member}
}
