#!/usr/bin/env python3
"""A real OpenID Connect provider for the tests: Glewlwyd (Debian's package) on 127.0.0.1 over
HTTPS, on SQLite, in a directory of its own, set up through its admin API with no manual step.

    openid-provider.py start DIR        starts it; prints one JSON line (issuer, ca, port, pid)
    openid-provider.py stop DIR         stops it
    openid-provider.py client DIR ID REDIRECT...   registers (or updates) a public client
    openid-provider.py rotate DIR       a new signing key, newest first; the old still verifies
    openid-provider.py browser-login URL USER PASSWORD   headless Chromium signs in as a person
                                        would (login page, consent) and prints where it ended
    openid-provider.py browser-device URL USER PASSWORD  approves a device code on the provider's
                                        own pages

The test user is `alice` / `correct horse` (Alice Example, alice@example.org). Facts and pitfalls
of this provider: ../shared notes, and docs/AUTH.md.
"""
import gzip
import http.cookiejar
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

ADMIN = ("admin", "password")
USER = {"username": "alice", "password": "correct horse", "name": "Alice Example", "email": "alice@example.org"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, **kw)


def make_certificates(d):
    """A CA of the test's own and a server certificate for 127.0.0.1 signed by it."""
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
        "-subj", "/CN=Spark test OpenID CA", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", f"{d}/server.key", "-out", f"{d}/server.csr")
    with open(f"{d}/ext.cnf", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", f"{d}/ext.cnf", "-out", f"{d}/server.pem")


def new_jwks(kid):
    """An RSA-2048 private JWKS with one key (rnbyc, Glewlwyd's own tool)."""
    out = run("rnbyc", "-j", "-g", "RSA2048", "-k", kid, "-a", "RS256").stdout
    decoder, text, keys = json.JSONDecoder(), out.decode().strip(), []
    while text:
        document, end = decoder.raw_decode(text)
        keys += document["keys"]
        text = text[end:].strip()
    # rnbyc prints the private key and its public half: the plugin wants the private ones.
    return {"keys": [key for key in keys if "d" in key]}


class Admin:
    def __init__(self, base, ca):
        self.base = base
        context = ssl.create_default_context(cafile=ca)
        jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context), urllib.request.HTTPCookieProcessor(jar))
        self.call("POST", "/api/auth/", {"username": ADMIN[0], "password": ADMIN[1]})

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with self.opener.open(request, timeout=10) as response:
            text = response.read()
            return json.loads(text) if text.strip() else None


def plugin_parameters(issuer, jwks, kid):
    return {
        "iss": issuer, "jwt-type": "rsa", "jwt-key-size": "256", "jwks-private": json.dumps(jwks), "default-kid": kid,
        "jwks-show": True, "jwks-uri": "", "jwks-public": "", "key": "", "cert": "",
        "access-token-duration": 3600, "refresh-token-duration": 1209600, "code-duration": 600,
        "refresh-token-rolling": True, "refresh-token-one-use": "never",
        "client-refresh-token-one-use-parameter": "refresh-token-one-use",
        "allow-non-oidc": False, "auth-type-code-enabled": True, "auth-type-code-revoke-replayed": False,
        "auth-type-token-enabled": False, "auth-type-id-token-enabled": True, "auth-type-none-enabled": False,
        "auth-type-password-enabled": False, "auth-type-client-enabled": False, "auth-type-device-enabled": True,
        "auth-type-refresh-enabled": True, "scope": [], "additional-parameters": [], "claims": [],
        "service-documentation": "", "op-policy-uri": "", "op-tos-uri": "", "jwks-x5c": [],
        "request-parameter-allow": False, "request-uri-allow-https-non-secure": False,
        "request-parameter-allow-encrypted": False, "request-parameter-ietf-strict": False, "secret-type": "public",
        "address-claim": {"type": "no", "formatted": "", "street_address": "", "locality": "", "region": "",
                          "postal_code": "", "country": "", "mandatory": False},
        "name-claim": "mandatory", "name-claim-scope": [], "email-claim": "mandatory", "email-claim-scope": [],
        "scope-claim": "no", "scope-claim-scope": [], "allowed-scope": ["openid"],
        "pkce-allowed": True, "pkce-method-plain-allowed": False, "pkce-required": True,
        "pkce-required-public-client": True, "pkce-scopes": [],
        "introspection-revocation-allowed": True, "introspection-revocation-auth-scope": ["openid"],
        "introspection-revocation-allow-target-client": True,
        "register-client-allowed": False, "session-management-allowed": False,
        "device-authorization-expiration": 600, "device-authorization-interval": 1,
        "oauth-dpop-allowed": False, "resource-allowed": False, "oauth-rar-allowed": False, "oauth-par-allowed": False,
        "oauth-ciba-allowed": False, "oauth-fapi-allow-restrict-alg": False,
    }


def launch(d):
    """Configures and starts glewlwyd on a free port; (port, base, process), process None when it
    did not start (its log says why)."""
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    # The packaged web app's config.json is a symlink, which the static file server refuses: copy.
    # A second launch (another port, after the first lost its bind) starts from a fresh copy: the
    # first one's config.json, a file of our own by then, is in the way of copying the link.
    shutil.rmtree(f"{d}/webapp", ignore_errors=True)
    shutil.copytree("/usr/share/glewlwyd/webapp", f"{d}/webapp", symlinks=False)
    shutil.rmtree(f"{d}/webapp/config.json", ignore_errors=True)
    with open("/usr/share/glewlwyd/templates/config.json") as f:
        webapp = json.load(f)
    webapp["GlewlwydUrl"] = base + "/"
    webapp["lang"] = ["en"]
    with open(f"{d}/webapp/config.json", "w") as f:
        json.dump(webapp, f)
    if os.path.exists(f"{d}/glewlwyd.db"):
        os.remove(f"{d}/glewlwyd.db")
    with gzip.open("/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz") as f:
        subprocess.run(["sqlite3", f"{d}/glewlwyd.db"], input=f.read(), check=True)
    shutil.copy("/etc/glewlwyd/glewlwyd.conf", f"{d}/glewlwyd.conf")
    with open(f"{d}/glewlwyd.conf") as f:
        conf = f.read()
    replace = {
        "port=4593": f"port={port}",
        'external_url="http://localhost:4593"': f'external_url="{base}"',
        'static_files_path="/usr/share/glewlwyd/webapp/"': f'static_files_path="{d}/webapp/"',
        'cookie_domain="localhost"': 'cookie_domain="127.0.0.1"',
        'path = "/var/cache/glewlwyd/glewlwyd.db"': f'path = "{d}/glewlwyd.db"',
        "use_secure_connection=false": "use_secure_connection=true",
        'secure_connection_key_file="/etc/ssl/certs/cert.key"': f'secure_connection_key_file="{d}/server.key"',
        'secure_connection_pem_file="/etc/ssl/certs/cert.pem"': f'secure_connection_pem_file="{d}/server.pem"',
        'secure_connection_ca_file="/etc/ssl/certs/ca.crt"': "",
    }
    for old, new in replace.items():
        assert old in conf, old
        conf = conf.replace(old, new)
    with open(f"{d}/glewlwyd.conf", "w") as f:
        f.write(conf)
    log = open(f"{d}/glewlwyd.log", "w")
    process = subprocess.Popen(["glewlwyd", f"--config-file={d}/glewlwyd.conf"], stdout=log, stderr=log,
                               start_new_session=True, close_fds=True)
    with open(f"{d}/pid", "w") as f:
        f.write(str(process.pid))
    deadline = time.time() + 15
    while True:
        if process.poll() is not None:
            return port, base, None
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            # Connected: to glewlwyd only if it is still running (not another process's port).
            time.sleep(0.1)
            if process.poll() is None:
                return port, base, process
            return port, base, None
        except OSError:
            if time.time() > deadline:
                process.kill()
                process.wait()
                return port, base, None
            time.sleep(0.05)


def start(d):
    d = os.path.abspath(d)
    os.makedirs(d, exist_ok=True)
    make_certificates(d)
    # A port found free can be taken by another process before glewlwyd binds it (the test
    # suites start servers in parallel): a launch that fails to bind is tried on another port.
    for attempt in range(5):
        port, base, process = launch(d)
        if process is not None:
            break
    else:
        raise SystemExit(f"glewlwyd did not start: {open(f'{d}/glewlwyd.log').read()[-2000:]}")
    issuer = f"{base}/api/oidc"
    admin = Admin(base, f"{d}/ca.pem")
    admin.call("PUT", "/api/scope/openid", {"name": "openid", "display_name": "Open ID", "description": "OpenID",
                                            "password_required": True, "password_max_age": 0, "scheme": {}})
    jwks = new_jwks("key-1")
    admin.call("POST", "/api/mod/plugin/", {"module": "oidc", "name": "oidc", "display_name": "OpenID Connect",
                                            "enabled": True, "parameters": plugin_parameters(issuer, jwks, "key-1")})
    admin.call("POST", "/api/user/", {"username": USER["username"], "password": USER["password"],
                                      "name": USER["name"], "email": USER["email"], "scope": ["openid"],
                                      "enabled": True})
    state = {"issuer": issuer, "ca": f"{d}/ca.pem", "port": port, "pid": process.pid, "base": base,
             "user": USER["username"], "password": USER["password"], "keys": ["key-1"]}
    with open(f"{d}/state.json", "w") as f:
        json.dump(state, f)
    print(json.dumps(state), flush=True)


def load(d):
    with open(f"{os.path.abspath(d)}/state.json") as f:
        return json.load(f)


def client(d, client_id, redirects):
    """A public client (a native app: PKCE, no secret)."""
    state = load(d)
    admin = Admin(state["base"], state["ca"])
    body = {"client_id": client_id, "name": client_id, "description": "Spark test client", "confidential": False,
            "enabled": True, "redirect_uri": list(redirects),
            "authorization_type": ["code", "refresh_token", "device_authorization"], "scope": ["openid"]}
    try:
        admin.call("GET", f"/api/client/{client_id}")
        admin.call("PUT", f"/api/client/{client_id}", body)
    except urllib.error.HTTPError:
        admin.call("POST", "/api/client/", body)
    print(json.dumps({"client_id": client_id}))


def rotate(d):
    state = load(d)
    admin = Admin(state["base"], state["ca"])
    plugin = admin.call("GET", "/api/mod/plugin/oidc")
    parameters = plugin["parameters"]
    kid = f"key-{len(state['keys']) + 1}"
    old = json.loads(parameters["jwks-private"])
    new = new_jwks(kid)
    parameters["jwks-private"] = json.dumps({"keys": new["keys"] + old["keys"]})
    parameters["default-kid"] = kid
    admin.call("PUT", "/api/mod/plugin/oidc", {"module": "oidc", "name": "oidc", "display_name": plugin["display_name"],
                                               "enabled": True, "parameters": parameters})
    admin.call("PUT", "/api/mod/plugin/oidc/reset")
    state["keys"].append(kid)
    with open(f"{os.path.abspath(d)}/state.json", "w") as f:
        json.dump(state, f)
    print(json.dumps({"kid": kid}))


def stop(d):
    try:
        pid = load(d)["pid"]
        os.killpg(pid, signal.SIGTERM)
    except (OSError, KeyError, FileNotFoundError):
        pass


def browser(url, user, password, device):
    """Headless Chromium on the provider's real pages: the login form, then the consent. A machine
    busy with other tests can make Chromium slow to start or a page slow to run: the waits are
    long, and a failed attempt is made once more with a fresh browser."""
    for attempt in range(2):
        try:
            return browse_once(url, user, password, device)
        except Exception as error:  # Selenium's timeouts and a browser that died
            if attempt == 1:
                raise
            print(f"browser attempt failed ({type(error).__name__}: {str(error)[:200]}); trying again",
                  file=sys.stderr, flush=True)


def browse_once(url, user, password, device):
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    from selenium.webdriver.chrome.service import Service
    from selenium.common.exceptions import StaleElementReferenceException

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--ignore-certificate-errors"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(90)
    wait = WebDriverWait(driver, 90)
    try:
        driver.get(url)
        wait.until(lambda d: d.find_elements(By.ID, "username") and d.find_element(By.ID, "username").is_displayed())
        driver.find_element(By.ID, "username").send_keys(user)
        driver.find_element(By.ID, "password").send_keys(password)
        driver.find_element(By.ID, "loginbut").click()

        def continue_button(d):
            # The page renders again as it loads: an element found a moment ago may be gone.
            try:
                for button in d.find_elements(By.CSS_SELECTOR, "button"):
                    if button.text == "Continue" and button.is_displayed() and button.is_enabled():
                        button.click()
                        return True
            except StaleElementReferenceException:
                pass
            return False

        wait.until(continue_button)
        if device:
            wait.until(lambda d: "prompt=deviceComplete" in d.current_url)
        else:
            # The provider redirects to the app's loopback address with the code.
            wait.until(lambda d: not d.current_url.startswith(url.split("/api/")[0]))
        print(driver.current_url, flush=True)
    finally:
        driver.quit()


def main():
    command, *args = sys.argv[1:]
    if command == "start":
        start(args[0])
    elif command == "stop":
        stop(args[0])
    elif command == "client":
        client(args[0], args[1], args[2:])
    elif command == "rotate":
        rotate(args[0])
    elif command == "browser-login":
        browser(args[0], args[1], args[2], device=False)
    elif command == "browser-device":
        browser(args[0], args[1], args[2], device=True)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
