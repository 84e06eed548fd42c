package kafkron

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNothingSetIsPlaintextWithNoOption(t *testing.T) {
	s, err := LoadSecurity(envOf(nil))
	if err != nil || s.Protocol != "PLAINTEXT" {
		t.Fatalf("%v %v", s, err)
	}
	opts, err := s.Opts()
	if err != nil || len(opts) != 0 {
		t.Fatalf("options for plaintext: %d %v", len(opts), err)
	}
}

func TestAClientConfigFileAsKafkasToolsReadIt(t *testing.T) {
	ca := writeFile(t, "ca.pem", "")
	config := writeFile(t, "admin.properties", "# kafkron\n"+
		"security.protocol=sasl_ssl\n"+
		"sasl.mechanism: SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"+
		"    username=\"work-a\" password=\"p\\\"w\";\n"+
		"ssl.truststore.type=PEM\n"+
		"ssl.truststore.location="+ca+"\n")
	s, err := LoadSecurity(envOf(map[string]string{"KAFKRON_CLIENT_CONFIG": config}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Protocol != "SASL_SSL" || s.Mechanism != "SCRAM-SHA-512" || s.Username != "work-a" ||
		s.password != `p"w` || s.CAFile != ca {
		t.Fatalf("%+v", s)
	}
	if strings.Contains(s.String(), `p"w`) {
		t.Fatalf("the password shows: %s", s)
	}
}

func TestTheEnvironmentWinsOverTheFile(t *testing.T) {
	config := writeFile(t, "c.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"+
		"sasl.jaas.config=x required username=\"file-user\" password=\"file-pw\";\n")
	pw := writeFile(t, "pw", "env-pw\n")
	s, err := LoadSecurity(envOf(map[string]string{
		"KAFKRON_CLIENT_CONFIG": config, "KAFKRON_SECURITY_PROTOCOL": "sasl_plaintext",
		"KAFKRON_SASL_USERNAME": "env-user", "KAFKRON_SASL_PASSWORD_FILE": pw,
	}))
	if err != nil || s.Protocol != "SASL_PLAINTEXT" || s.Username != "env-user" || s.password != "env-pw" {
		t.Fatalf("%+v %v", s, err)
	}
	opts, err := s.Opts()
	if err != nil || len(opts) != 1 {
		t.Fatalf("SASL_PLAINTEXT options: %d %v", len(opts), err)
	}
}

func TestIncompleteOrWrongSettingsAreRefusedWithoutThePassword(t *testing.T) {
	pw := writeFile(t, "pw", "s3cret\n")
	empty := writeFile(t, "empty", "\n")
	jks := writeFile(t, "jks.properties", "ssl.truststore.location=/x.jks\n")
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"KAFKRON_SECURITY_PROTOCOL": "TLS"}, "is not one of PLAINTEXT"},
		{map[string]string{"KAFKRON_SECURITY_PROTOCOL": "SASL_SSL", "KAFKRON_SASL_MECHANISM": "GSSAPI"}, "SASL mechanism"},
		{map[string]string{"KAFKRON_SECURITY_PROTOCOL": "SASL_SSL"}, "needs a user"},
		{map[string]string{"KAFKRON_SECURITY_PROTOCOL": "SASL_SSL", "KAFKRON_SASL_USERNAME": "u"}, "KAFKRON_SASL_PASSWORD_FILE"},
		{map[string]string{"KAFKRON_SASL_PASSWORD_FILE": empty}, "is empty"},
		{map[string]string{"KAFKRON_SASL_PASSWORD_FILE": "/no/such/file"}, "cannot read it"},
		{map[string]string{"KAFKRON_CLIENT_CONFIG": jks}, "reads PEM certificates only"},
		{map[string]string{"KAFKRON_SECURITY_PROTOCOL": "SASL_SSL", "KAFKRON_SASL_MECHANISM": "OAUTH",
			"KAFKRON_SASL_USERNAME": "u", "KAFKRON_SASL_PASSWORD_FILE": pw}, "SASL mechanism"},
	}
	for _, c := range cases {
		_, err := LoadSecurity(envOf(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.env, err, c.want)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the password shows: %v", err)
		}
	}
}

func TestACAFileWithoutACertificateIsRefused(t *testing.T) {
	bad := writeFile(t, "bad.pem", "not a certificate")
	s, err := LoadSecurity(envOf(map[string]string{"KAFKRON_SECURITY_PROTOCOL": "SSL", "KAFKRON_SSL_CAFILE": bad}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Opts(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("%v", err)
	}
}
