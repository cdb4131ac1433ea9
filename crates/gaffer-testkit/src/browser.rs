//! Real headless Chromium for the web page's tests and benchmarks, driven through
//! chromedriver (WebDriver) with fantoccini, plus the few DevTools commands
//! WebDriver lacks: an exact viewport, the light or dark colour scheme, and
//! granting notifications.
//!
//! [`Driver::start`] skips (returns `None`, saying why) only when `chromium` or
//! `chromedriver` is missing and `CI` is unset; in CI a missing browser fails.

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine as _;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// A running chromedriver; browsers started from it get their own profiles.
pub struct Driver {
    child: Child,
    port: u16,
    profiles: tempfile::TempDir,
    chromium: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    /// chromedriver on a free port, or `None` (skip) when the browser is not
    /// installed outside CI.
    pub fn start() -> Result<Option<Self>> {
        let (chromium, chromedriver) = match (which("chromium"), which("chromedriver")) {
            (Some(c), Some(d)) => (c, d),
            missing => {
                if std::env::var_os("CI").is_some() {
                    bail!("CI is set but chromium/chromedriver is missing ({missing:?}); install the Debian packages `chromium` and `chromium-driver`");
                }
                eprintln!("SKIPPED browser test: chromium and chromedriver are not installed (apt-get install chromium chromium-driver); set CI=1 to make this a failure");
                return Ok(None);
            }
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting chromedriver")?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                bail!("chromedriver did not start");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Some(Self {
            child,
            port,
            profiles: tempfile::tempdir()?,
            chromium,
        }))
    }

    /// A new headless browser with its own profile, at `width`×`height` CSS pixels.
    pub async fn browser(&self, profile: &str, width: u32, height: u32) -> Result<Browser> {
        self.browser_with(profile, width, height, &[]).await
    }

    /// [`Driver::browser`] with extra command-line switches.
    pub async fn browser_with(
        &self,
        profile: &str,
        width: u32,
        height: u32,
        extra: &[&str],
    ) -> Result<Browser> {
        let dir = self.profiles.path().join(profile);
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ]
        .iter()
        .chain(extra)
        .map(|a| a.to_string())
        .collect();
        args.push(format!("--window-size={width},{height}"));
        args.push(format!("--user-data-dir={}", dir.display()));
        let mut caps = serde_json::Map::new();
        caps.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": self.chromium, "args": args }),
        );
        // Built with the whole workspace, rustls has two providers and picks none itself.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = ClientBuilder::rustls()?
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await?;
        let b = Browser { client };
        b.viewport(width, height).await?;
        // Script errors, for the message of a wait that timed out.
        b.cdp(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": "window.__errors = []; addEventListener('error', (e) => __errors.push(e.message + ' at ' + e.filename + ':' + e.lineno)); addEventListener('unhandledrejection', (e) => __errors.push('unhandled: ' + (e.reason && e.reason.stack || e.reason)));" }),
        )
        .await?;
        Ok(b)
    }
}

/// One browser (one WebDriver session).
pub struct Browser {
    /// The WebDriver client, for what this wrapper does not cover.
    pub client: Client,
}

/// A chromedriver command WebDriver does not have: `path` under the session, a JSON body.
#[derive(Debug)]
struct Extension {
    path: &'static str,
    body: Value,
}

impl WebDriverCompatibleCommand for Extension {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/{}", session.unwrap_or(""), self.path))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(self.body.to_string()))
    }
}

impl Browser {
    /// Run a DevTools command.
    pub async fn cdp(&self, cmd: &'static str, params: Value) -> Result<Value> {
        Ok(self
            .client
            .issue_cmd(Extension {
                path: "goog/cdp/execute",
                body: json!({ "cmd": cmd, "params": params }),
            })
            .await?)
    }

    /// What the page wrote to its console since the last call (errors included).
    pub async fn console(&self) -> Result<Vec<String>> {
        let log = self
            .client
            .issue_cmd(Extension {
                path: "se/log",
                body: json!({ "type": "browser" }),
            })
            .await?;
        Ok(log
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| format!("{} {}", e["level"], e["message"]))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Lay the page out at exactly `width`×`height` CSS pixels, as a phone or a laptop would.
    pub async fn viewport(&self, width: u32, height: u32) -> Result<()> {
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600 }),
        )
        .await?;
        Ok(())
    }

    /// Ask for the dark (or light) colour scheme, as the system setting would.
    pub async fn dark(&self, dark: bool) -> Result<()> {
        self.cdp(
            "Emulation.setEmulatedMedia",
            json!({ "features": [{ "name": "prefers-color-scheme", "value": if dark { "dark" } else { "light" } }] }),
        )
        .await?;
        Ok(())
    }

    /// Allow `origin` to show notifications, as a person clicking "Allow" would.
    pub async fn grant_notifications(&self, origin: &str) -> Result<()> {
        self.cdp(
            "Browser.grantPermissions",
            json!({ "origin": origin, "permissions": ["notifications"] }),
        )
        .await?;
        Ok(())
    }

    /// Open `url`.
    pub async fn goto(&self, url: &str) -> Result<()> {
        Ok(self.client.goto(url).await?)
    }

    /// Click the element `css` finds.
    pub async fn click(&self, css: &str) -> Result<()> {
        self.client
            .find(fantoccini::Locator::Css(css))
            .await
            .with_context(|| format!("no {css} to click"))?
            .click()
            .await?;
        Ok(())
    }

    /// Type `text` into the element `css` finds, as a person would.
    pub async fn type_into(&self, css: &str, text: &str) -> Result<()> {
        self.client
            .find(fantoccini::Locator::Css(css))
            .await
            .with_context(|| format!("no {css} to type into"))?
            .send_keys(text)
            .await?;
        Ok(())
    }

    /// The value of a JavaScript expression (its JSON).
    pub async fn eval(&self, js: &str) -> Result<Value> {
        Ok(self
            .client
            .execute(&format!("return ({js});"), vec![])
            .await?)
    }

    /// The value of a JavaScript expression that is a promise.
    pub async fn eval_async(&self, js: &str) -> Result<Value> {
        Ok(self
            .client
            .execute_async(
                &format!("const done = arguments[arguments.length - 1]; Promise.resolve({js}).then(done, (e) => done({{error: String(e)}}));"),
                vec![],
            )
            .await?)
    }

    /// Wait (up to 15 s) until `js` is true; the page's HTML in the error otherwise.
    pub async fn wait_for(&self, what: &str, js: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if self.eval(&format!("!!({js})")).await?.as_bool() == Some(true) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let errors = self.eval("window.__errors").await.unwrap_or_default();
                let console = self.console().await.unwrap_or_default().join("\n");
                let html = self.client.source().await.unwrap_or_default();
                return Err(anyhow!(
                    "timed out waiting for {what}; script errors: {errors}; console:\n{console}\npage:\n{html}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }

    /// A screenshot of the whole page (not only the viewport), saved to `path`.
    pub async fn screenshot(&self, path: &Path) -> Result<()> {
        let metrics = self.cdp("Page.getLayoutMetrics", json!({})).await?;
        let size = &metrics["cssContentSize"];
        let width = size["width"].as_f64().unwrap_or(0.0).ceil();
        let height = size["height"].as_f64().unwrap_or(0.0).ceil().min(6000.0);
        self.capture(0.0, width, height, path).await
    }

    /// A screenshot of the page from the top of the first element `css` matches, the
    /// page's width and `height` px tall (a close-up of one part of a long page, at
    /// its real size), saved to `path`.
    pub async fn screenshot_from(&self, css: &str, height: f64, path: &Path) -> Result<()> {
        let top = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({css:?}); return e ? e.getBoundingClientRect().top + window.scrollY : null; }})()"
            ))
            .await?
            .as_f64()
            .ok_or_else(|| anyhow!("no element matches {css}"))?;
        let metrics = self.cdp("Page.getLayoutMetrics", json!({})).await?;
        let width = metrics["cssContentSize"]["width"]
            .as_f64()
            .unwrap_or(0.0)
            .ceil();
        self.capture(top.floor(), width, height, path).await
    }

    async fn capture(&self, y: f64, width: f64, height: f64, path: &Path) -> Result<()> {
        let shot = self
            .cdp(
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": true,
                        "clip": { "x": 0, "y": y, "width": width, "height": height, "scale": 1 } }),
            )
            .await?;
        let data = shot["data"]
            .as_str()
            .ok_or_else(|| anyhow!("no screenshot data"))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(
            path,
            base64::engine::general_purpose::STANDARD.decode(data)?,
        )?;
        Ok(())
    }

    /// Run axe-core (`axe_source`: the text of `axe.min.js`) on the page and return
    /// its violations of `impact` (`"critical"`, …), as `rule: what (where)` lines.
    pub async fn axe(&self, axe_source: &str, impact: &str) -> Result<Vec<String>> {
        self.client.execute(axe_source, vec![]).await?;
        let found = self
            .eval_async(&format!(
                "axe.run(document, {{ resultTypes: ['violations'] }}).then((r) => r.violations.filter((v) => v.impact === {impact:?}).map((v) => v.id + ': ' + v.help + ' (' + v.nodes.map((n) => n.target.join(' ')).join(', ') + ')'))"
            ))
            .await?;
        serde_json::from_value(found.clone()).map_err(|_| anyhow!("axe failed: {found}"))
    }

    /// Close the session.
    pub async fn close(self) -> Result<()> {
        Ok(self.client.close().await?)
    }
}
