package kafkron

// Built-in jobs: "shell" (a command) and "http" / "kafkron.http" (an HTTP call, the
// carrier job of an HTTP target: topics/targets.py, actors/worker/http_status.py).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RegisterShell adds "shell": args {"command": "...", "env": {"NAME": "value"}}; the
// command runs under /bin/sh -c with KAFKRON_RUN_ID, KAFKRON_ATTEMPT and
// KAFKRON_IDEMPOTENCY_KEY set; exit 0 succeeds, another status fails (ShellExit,
// retried by the shard; 65 fails NonRetryable); a stop kills its process group.
func RegisterShell(reg *Registry) {
	reg.Register("shell", func(ctx context.Context, rc *RunContext) error {
		command, ok := rc.Args["command"].(string)
		if !ok || command == "" {
			return NonRetryable("shell: args.command must be a non-empty string")
		}
		cmd := exec.Command("/bin/sh", "-c", command)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Env = append(os.Environ(),
			"KAFKRON_RUN_ID="+rc.Run.RunID,
			"KAFKRON_ATTEMPT="+strconv.Itoa(rc.Run.Attempt),
			"KAFKRON_IDEMPOTENCY_KEY="+rc.Run.IdempotencyKey)
		if env, ok := rc.Args["env"].(map[string]any); ok {
			for k, v := range env {
				cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%v", k, v))
			}
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return &JobError{Type: "ShellError", Message: err.Error()}
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return shellError(err, out.String())
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return ctx.Err()
		}
	})
}

func shellError(err error, output string) error {
	if err == nil {
		return nil
	}
	tail := output
	if len(tail) > 1000 {
		tail = tail[len(tail)-1000:]
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		kind := "ShellExit"
		if exit.ExitCode() == 65 {
			kind = NonRetryableType
		}
		return &JobError{Type: kind, Message: fmt.Sprintf("exit status %d: %s", exit.ExitCode(), strings.TrimSpace(tail))}
	}
	return &JobError{Type: "ShellError", Message: err.Error()}
}

const (
	httpRetryableType  = "HttpStatus"
	httpConnectionType = "HttpConnectionError"
	httpTimeoutType    = "HttpTimeout"
	bodyExcerptBytes   = 1024
	retryAfterMaxS     = 3600
)

var placeholder = regexp.MustCompile(`\{\{|\}\}|\{([a-z_]*)\}|[{}]`)

func render(text string, values map[string]string) string {
	return placeholder.ReplaceAllStringFunc(text, func(token string) string {
		switch token {
		case "{{":
			return "{"
		case "}}":
			return "}"
		}
		return values[strings.Trim(token, "{}")]
	})
}

func renderJSON(v any, values map[string]string) any {
	switch t := v.(type) {
	case string:
		return render(t, values)
	case []any:
		out := make([]any, len(t))
		for i, item := range t {
			out[i] = renderJSON(item, values)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, item := range t {
			out[k] = renderJSON(item, values)
		}
		return out
	}
	return v
}

func placeholderValues(run *Run) map[string]string {
	v := map[string]string{
		"run_id": run.RunID, "schedule_id": run.ScheduleID, "scheduled_at": FormatMs(run.ScheduledMs),
		"fired_at": FormatMs(run.FiredMs), "attempt": strconv.Itoa(run.Attempt),
		"idempotency_key": run.IdempotencyKey,
		"logical_date":    FormatMs(run.ScheduledMs), "data_interval_start": FormatMs(run.ScheduledMs),
		"data_interval_end": FormatMs(run.ScheduledMs),
	}
	if run.LogicalDateMs != nil {
		v["logical_date"] = FormatMs(*run.LogicalDateMs)
	}
	if run.Interval != nil {
		v["data_interval_start"], v["data_interval_end"] = FormatMs(run.Interval[0]), FormatMs(run.Interval[1])
	}
	return v
}

var notAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// RegisterHTTP adds "http" and "kafkron.http": args {"url", "method" (POST),
// "headers" (values text, or {"secret": NAME} read from KAFKRON_SECRET_<NAME>),
// "body" (JSON), "timeout_s" (10)}. Placeholders are rendered as for HTTP targets;
// every request carries Idempotency-Key. The result's target is
// {"http": {"status", "duration_ms", "body"}}.
//
// The egress rule (egress.go) refuses loopback, link-local, private and the other
// non-public addresses: RegisterHTTPWith takes a rule with what --http-allow allows.
func RegisterHTTP(reg *Registry) {
	rule, _ := ParseEgressRule(nil)
	RegisterHTTPWith(reg, rule)
}

// RegisterHTTPWith is RegisterHTTP with the egress rule given.
func RegisterHTTPWith(reg *Registry, rule *EgressRule) {
	call := func(ctx context.Context, rc *RunContext) error { return httpCall(ctx, rc, rule) }
	reg.Register("http", call)
	reg.Register("kafkron.http", call)
}

func httpCall(ctx context.Context, rc *RunContext, rule *EgressRule) error {
	values := placeholderValues(rc.Run)
	rawURL, _ := rc.Args["url"].(string)
	if rawURL == "" {
		return NonRetryable("http: args.url must be a URL")
	}
	url := render(rawURL, values)
	method, _ := rc.Args["method"].(string)
	if method == "" {
		method = "POST"
	}
	method = strings.ToUpper(method)
	timeout := 10.0
	if t, ok := rc.Args["timeout_s"].(float64); ok && t > 0 {
		timeout = t
	}
	var body io.Reader
	if b, ok := rc.Args["body"]; ok && b != nil {
		body = bytes.NewReader(marshal(renderJSON(b, values)))
	}
	ctx, cancel := context.WithTimeout(ctx, seconds(timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return NonRetryable("http: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", rc.Run.IdempotencyKey)
	req.Header.Set("kafkron-run-id", rc.Run.RunID)
	req.Header.Set("kafkron-schedule-id", rc.Run.ScheduleID)
	req.Header.Set("kafkron-scheduled-at", FormatMs(rc.Run.ScheduledMs))
	req.Header.Set("kafkron-attempt", strconv.Itoa(rc.Run.Attempt))
	if headers, ok := rc.Args["headers"].(map[string]any); ok {
		for name, v := range headers {
			switch t := v.(type) {
			case string:
				req.Header.Set(name, render(t, values))
			case map[string]any:
				secret, _ := t["secret"].(string)
				env := "KAFKRON_SECRET_" + strings.ToUpper(notAlnum.ReplaceAllString(secret, "_"))
				value, found := os.LookupEnv(env)
				if !found {
					return NonRetryable("http: secret %q is not set on this worker (%s)", secret, env)
				}
				req.Header.Set(name, value)
			}
		}
	}
	// The dialer checks every address it connects to (egress.go); no proxy of the
	// environment, whose address the rule would never see.
	dialer := &net.Dialer{Timeout: seconds(timeout), Control: rule.control(req.URL.Hostname())}
	transport := &http.Transport{Proxy: nil, DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
		TLSHandshakeTimeout: seconds(timeout)}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	started := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		if refused := asEgressRefused(err); refused != nil {
			return NonRetryable("EgressRefused: %s", refused.Why)
		}
		if rc.CancelReason() != "" {
			return ErrCancelled
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return &JobError{Type: httpTimeoutType, Message: fmt.Sprintf("%s %s: no answer in %.0f s", method, url, timeout)}
		}
		return &JobError{Type: httpConnectionType, Message: fmt.Sprintf("%s %s: %v", method, url, err)}
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, bodyExcerptBytes))
	target := map[string]any{"http": map[string]any{
		"status": resp.StatusCode, "duration_ms": time.Since(started).Milliseconds(), "body": string(excerpt),
	}}
	return &TargetOutcome{Target: target, Err: statusError(resp, method+" "+url)}
}

func statusError(resp *http.Response, request string) error {
	status := resp.StatusCode
	if status >= 200 && status < 300 {
		return nil
	}
	said := fmt.Sprintf("HTTP %d %s from %s", status, http.StatusText(status), request)
	if status == 408 || status == 429 || (status >= 500 && status < 600) {
		e := &JobError{Type: httpRetryableType, Message: said}
		if after, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && after >= 0 {
			if after > retryAfterMaxS {
				after = retryAfterMaxS
			}
			e.Message += fmt.Sprintf(" (Retry-After: %d s)", after)
			e.RetryAfterS = strconv.Itoa(after)
		}
		return e
	}
	return &JobError{Type: NonRetryableType, Message: said}
}
