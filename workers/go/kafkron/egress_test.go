package kafkron

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func TestTheDefaultRuleRefusesWhatReachesInsideAndAllowsPublicAddresses(t *testing.T) {
	rule, _ := ParseEgressRule(nil)
	refused := map[string]string{
		"127.0.0.1": "loopback", "10.1.2.3": "private", "172.16.0.1": "private",
		"192.168.1.1": "private", "169.254.169.254": "link-local", "0.0.0.0": "this network",
		"100.64.0.1": "carrier-grade", "224.0.0.1": "multicast", "255.255.255.255": "broadcast",
		"::1": "loopback", "::": "unspecified", "fd00::1": "unique local", "fe80::1": "link-local",
		"::ffff:127.0.0.1": "written as IPv6", "64:ff9b::a9fe:a9fe": "written as IPv6",
	}
	for text, want := range refused {
		why := rule.WhyRefused(netip.MustParseAddr(text), "")
		if !strings.Contains(why, want) || !strings.HasPrefix(why, "egress refused: ") {
			t.Errorf("%s: %q, want %q", text, why, want)
		}
	}
	for _, text := range []string{"93.184.216.34", "2606:2800:220:1::1", "8.8.8.8"} {
		if why := rule.WhyRefused(netip.MustParseAddr(text), ""); why != "" {
			t.Errorf("%s refused: %s", text, why)
		}
	}
	why := rule.WhyRefused(netip.MustParseAddr("::ffff:10.0.0.1"), "")
	if !strings.Contains(why, "--http-allow 10.0.0.1 ") {
		t.Errorf("the flag names the IPv4 address: %s", why)
	}
	named := rule.WhyRefused(netip.MustParseAddr("127.0.0.1"), "localhost")
	if !strings.Contains(named, "localhost resolves to 127.0.0.1") {
		t.Errorf("the host is named: %s", named)
	}
}

func TestHTTPAllowEntries(t *testing.T) {
	rule, err := ParseEgressRule([]string{"10.1.2.0/24", "127.0.0.1", "Billing.Internal.", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"10.1.2.200", "127.0.0.1", "fd00::5", "::ffff:10.1.2.3"} {
		if why := rule.WhyRefused(netip.MustParseAddr(text), ""); why != "" {
			t.Errorf("%s still refused: %s", text, why)
		}
	}
	if why := rule.WhyRefused(netip.MustParseAddr("10.1.3.1"), ""); why == "" {
		t.Error("10.1.3.1 allowed by 10.1.2.0/24")
	}
	if !rule.AllowsHost("billing.internal") || rule.AllowsHost("x.billing.internal") {
		t.Error("host names are allowed exactly")
	}
	for _, bad := range []string{"", "a b", "10.0.0.0/99", "under_score.example"} {
		if _, err := ParseEgressRule([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func httpRun(url string) *RunContext {
	return &RunContext{Run: &Run{RunID: "r", ScheduleID: "s", Attempt: 1, IdempotencyKey: "k"},
		Args: map[string]any{"url": url, "method": "GET", "timeout_s": 5.0}}
}

func TestAnHTTPJobNeverConnectsToARefusedAddressByAddressOrByName(t *testing.T) {
	var heard atomic.Int64
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		heard.Add(1)
		w.WriteHeader(204)
	}))
	defer server.Close()
	rule, _ := ParseEgressRule(nil)
	byName := strings.Replace(server.URL, "127.0.0.1", "localhost", 1)
	for _, url := range []string{server.URL, byName} {
		err := httpCall(context.Background(), httpRun(url), rule)
		var jobErr *JobError
		if !errors.As(err, &jobErr) || jobErr.Type != NonRetryableType ||
			!strings.HasPrefix(jobErr.Message, "EgressRefused: egress refused") {
			t.Fatalf("%s: %v", url, err)
		}
		if url == byName && !strings.Contains(jobErr.Message, "localhost resolves to") {
			t.Errorf("the name is not said: %s", jobErr.Message)
		}
	}
	if heard.Load() != 0 {
		t.Fatalf("the server heard %d requests", heard.Load())
	}
	allowed, _ := ParseEgressRule([]string{"127.0.0.1"})
	byHost, _ := ParseEgressRule([]string{"localhost"})
	for _, c := range []struct {
		rule *EgressRule
		url  string
	}{{allowed, server.URL}, {byHost, byName}} {
		err := httpCall(context.Background(), httpRun(c.url), c.rule)
		var outcome *TargetOutcome
		if !errors.As(err, &outcome) || outcome.Err != nil {
			t.Fatalf("%s allowed: %v", c.url, err)
		}
	}
	if heard.Load() != 2 {
		t.Fatalf("the server heard %d requests, want 2", heard.Load())
	}
}
