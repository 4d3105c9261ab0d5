//! A real browser for the page's tests: Debian's headless Chromium driven over WebDriver
//! (`chromedriver`, through fantoccini), each browser with a new empty profile. Tests wait on
//! what the page shows by polling a script (`until`), never by sleeping a fixed time.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// Where Debian's packages `chromium` and `chromium-driver` put them.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long a test waits for the page to show something.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A running chromedriver with one Chromium session.
pub struct Browser {
    driver: Child,
    pub client: Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium, or `None` (after printing `SKIPPED` and
    /// why) when they are not installed outside CI.
    ///
    /// Panics when they are missing and `CI` is `true` (or `1`): there a skipped browser test
    /// is a failure (`.ci/run` installs them).
    pub async fn start() -> Option<Self> {
        if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
            crate::skip::cannot_run(
                &format!("{CHROMIUM} or {CHROMEDRIVER} is missing"),
                "Install them: apt-get install chromium chromium-driver (.ci/run does).",
            );
            return None;
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = tempfile::tempdir().expect("profile folder");
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1600,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }
        });
        let capabilities = match capabilities {
            Value::Object(map) => map,
            _ => unreachable!("an object"),
        };
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(error) => {
                    assert!(
                        Instant::now() < deadline,
                        "chromedriver did not start a browser within 30 s: {error}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Some(Self {
            driver,
            client,
            _profile: profile,
        })
    }

    /// Opens `url` in a new tab and makes it the current one; returns its handle.
    pub async fn open_tab(&self, url: &str) -> fantoccini::wd::WindowHandle {
        let tab = self.client.new_window(true).await.expect("new tab");
        let handle = tab.handle;
        self.client
            .switch_to_window(handle.clone())
            .await
            .expect("switch to the tab");
        self.client.goto(url).await.expect("open the page");
        handle
    }

    /// Switches to tab `handle`.
    pub async fn switch(&self, handle: &fantoccini::wd::WindowHandle) {
        self.client
            .switch_to_window(handle.clone())
            .await
            .expect("switch tab");
    }

    /// Runs `script` (a function body: `return ...`) in the current tab.
    pub async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Waits until `script` returns a truthy value in the current tab (polling every 100 ms,
    /// at most [`PATIENCE`]); returns that value.
    pub async fn until(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let value = self.eval(script).await;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!(0)
                && value != json!("");
            if truthy {
                return value;
            }
            if Instant::now() > deadline {
                let shown = self
                    .eval("return document.body.innerText.slice(0, 2000)")
                    .await;
                panic!("the page did not show {what} within {PATIENCE:?}; it shows:\n{shown}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the element `css` matches.
    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("cannot click {css}: {e}"));
    }

    /// Types `text` into the element `css` matches.
    pub async fn type_into(&self, css: &str, text: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("cannot type into {css}: {e}"));
    }

    /// Saves a screenshot of the current tab as `path` (PNG).
    pub async fn screenshot(&self, path: &Path) {
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::create_dir_all(path.parent().expect("folder")).expect("screenshot folder");
        std::fs::write(path, png).expect("write the screenshot");
    }

    /// Ends the browser session and chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// Where a test keeps its screenshots: `target/browser/`.
pub fn screenshot_folder() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/browser")
}
