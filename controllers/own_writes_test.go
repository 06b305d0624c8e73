package controllers

import (
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

func TestStatusChangedSkipsTheOperatorsOwnPatch(t *testing.T) {
	sent := ferrofedv1alpha1.GatewayStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{{
		Type: ferrofedv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready",
		LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 1, 11, 0, 0, 123456789, time.UTC)), // sent with nanoseconds
	}}}
	back := *sent.DeepCopy() // as the watch brings it back: to the second
	back.Conditions[0].LastTransitionTime = metav1.NewTime(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	forged := *back.DeepCopy()
	forged.Conditions[0].Status = metav1.ConditionFalse
	sum, err := statusSum(sent)
	if err != nil {
		t.Fatal(err)
	}
	gw := func(rv string, st ferrofedv1alpha1.GatewayStatus) *ferrofedv1alpha1.Gateway {
		return &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", ResourceVersion: rv}, Status: st}
	}
	old := gw("10", ferrofedv1alpha1.GatewayStatus{ObservedGeneration: 1})
	for _, tc := range []struct {
		name string
		own  *ownWrite
		cur  *ferrofedv1alpha1.Gateway
		want bool
	}{
		{"the patch's answer is skipped by its resourceVersion", &ownWrite{resourceVersion: "11", status: sum}, gw("11", back), false},
		{"the patch's event before its answer is skipped by its status", &ownWrite{status: sum}, gw("11", back), false},
		{"a status someone else wrote is reconciled", &ownWrite{resourceVersion: "11", status: sum}, gw("12", forged), true},
		{"a status change with no patch of the operator's is reconciled", nil, gw("11", back), true},
		{"an update that leaves the status alone is not", &ownWrite{status: sum}, gw("11", old.Status), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var own sync.Map
			if tc.own != nil {
				own.Store(client.ObjectKeyFromObject(tc.cur), *tc.own)
			}
			if got := (statusChanged{own: &own}).Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.cur}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
}
