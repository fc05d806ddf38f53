//! Headless Chromium (Debian's `chromium`) driven through the DevTools protocol over a pipe
//! (`--remote-debugging-pipe`: JSON messages ended by NUL on the browser's fds 3 and 4), so a
//! test can open a page, keep a token in its session storage as a user signing in would, and
//! read the page's DOM as it changes. The browser is killed on drop.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one DevTools call may take.
const CALL_MAX: Duration = Duration::from_secs(30);

/// A headless Chromium with one page.
pub struct Browser {
    child: Child,
    commands: ChildStdin,
    answers: Receiver<Value>,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium with a blank page, at a laptop's width; certificates are not checked (the
    /// test clusters' are self-signed).
    pub fn start() -> Browser {
        let profile = tempfile::tempdir().expect("a temporary directory");
        // The shell gives the browser its pipe: our stdin as its fd 3, our stdout as its fd 4.
        let script = format!(
            "exec chromium --headless --no-sandbox --disable-gpu --ignore-certificate-errors \
             --remote-debugging-pipe --user-data-dir={} --window-size=1280,900 about:blank \
             3<&0 4>&1 0</dev/null 1>/dev/null",
            profile.path().display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium runs (make test-deps installs it)");
        let commands = child.stdin.take().expect("piped");
        let mut replies = BufReader::new(child.stdout.take().expect("piped"));
        let (sender, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut message = Vec::new();
                match replies.read_until(0, &mut message) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                message.pop();
                if let Ok(value) = serde_json::from_slice::<Value>(&message)
                    && sender.send(value).is_err()
                {
                    return;
                }
            }
        });
        let mut browser = Browser { child, commands, answers, next_id: 0, session: String::new(), _profile: profile };
        let targets = browser.call("Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .expect("chromium lists its targets")
            .iter()
            .find(|target| target["type"] == "page")
            .expect("chromium opened a page")["targetId"]
            .clone();
        let attached = browser.call("Target.attachToTarget", json!({ "targetId": page, "flatten": true }));
        browser.session = attached["sessionId"].as_str().expect("a session id").to_string();
        browser.call("Page.enable", json!({}));
        browser.call("Runtime.enable", json!({}));
        browser
    }

    /// Sends one command (to the page, once attached) and answers its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            message["sessionId"] = self.session.clone().into();
        }
        let mut bytes = serde_json::to_vec(&message).expect("JSON encodes");
        bytes.push(0);
        self.commands.write_all(&bytes).expect("chromium takes commands");
        let deadline = Instant::now() + CALL_MAX;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(answer) if answer["id"] == id => {
                    assert!(answer.get("error").is_none(), "{method} failed: {answer}");
                    return answer["result"].clone();
                }
                Ok(_) => {} // an event, or another call's answer
                Err(RecvTimeoutError::Timeout) => panic!("chromium did not answer {method} within {CALL_MAX:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("chromium exited during {method}"),
            }
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise) and answers its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call("Runtime.evaluate", json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }));
        assert!(result.get("exceptionDetails").is_none(), "{expression} threw: {result}");
        result["result"]["value"].clone()
    }

    /// Opens `url` and waits until its document has loaded.
    pub fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url }));
        self.wait_until(&format!("{url} to load"), |browser| {
            (browser.eval("document.readyState") == "complete").then_some(())
        });
    }

    /// The page's text as a user sees it.
    pub fn text(&mut self) -> String {
        self.eval("document.body.innerText").as_str().unwrap_or_default().to_string()
    }

    /// The page's markup.
    pub fn html(&mut self) -> String {
        self.eval("document.documentElement.outerHTML").as_str().unwrap_or_default().to_string()
    }

    /// Polls `check` every 50 ms until it answers `Some`, or fails the test after
    /// [`crate::WAIT_MAX`].
    pub fn wait_until<T>(&mut self, what: &str, mut check: impl FnMut(&mut Browser) -> Option<T>) -> T {
        let deadline = Instant::now() + crate::WAIT_MAX;
        loop {
            if let Some(value) = check(self) {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; the page shows: {}", self.text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the page's text holds `needle`, and answers the text.
    pub fn wait_for_text(&mut self, needle: &str) -> String {
        self.wait_until(&format!("the page to show {needle:?}"), |browser| {
            let text = browser.text();
            text.contains(needle).then_some(text)
        })
    }

    /// Signs in as a user would: the token typed into the form and submitted.
    pub fn sign_in(&mut self, token: &str) {
        self.wait_for_text("Sign in");
        let token = serde_json::to_string(token).expect("JSON encodes");
        self.eval(&format!(
            "document.getElementById('token').value = {token}; \
             document.getElementById('login-form').requestSubmit(); true"
        ));
    }

    /// Emulates a screen `width` CSS pixels wide (a phone's is about 390).
    pub fn set_width(&mut self, width: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": 800, "deviceScaleFactor": 1, "mobile": width < 600 }),
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
