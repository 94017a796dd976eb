//! The chaos driver: one task that, until told to stop, SIGKILLs the manager
//! every few seconds and starts the next, forces the server to compact, reads
//! what the server injected, and kills and restarts the server when the
//! scenario asks (at the instants it chose: mid scale-up, mid scale-down...).

use std::time::{Duration, Instant};

use apiserver::faults::{FaultConfig, Injected};
use testkit::apiserver_process::{ApiServerProcess, DebugClient};
use tokio::sync::{mpsc, oneshot};

use super::Settings;
use crate::production_support::process::ManagerProcess;

/// What the chaos did.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Faults the server injected, summed over its lives (each life's count as
    /// last read before it was killed: a few at the very end may be missing).
    pub injected: Injected,
    /// Manager processes SIGKILLed.
    pub manager_kills: usize,
    /// API server processes SIGKILLed.
    pub apiserver_kills: usize,
    /// Forced compactions the server acknowledged.
    pub compactions: usize,
}

enum Command {
    KillApiServer(oneshot::Sender<()>),
}

/// A running driver; [`Chaos::stop`] ends it.
pub struct Chaos {
    commands: mpsc::Sender<Command>,
    task: tokio::task::JoinHandle<Outcome>,
}

/// What the driver hands back when it stops.
pub struct Outcome {
    pub figures: Figures,
    /// Held, not read: the server process lives until the test drops the outcome.
    #[allow(dead_code, reason = "held for its Drop, which stops the process")]
    pub server: ApiServerProcess,
    /// Every manager process, the killed ones too (their logs are written to
    /// `target/e2e-logs` if the test fails while they are alive).
    #[allow(dead_code, reason = "held for their Drop, which stops the processes")]
    pub managers: Vec<ManagerProcess>,
}

struct Driver {
    settings: Settings,
    server: ApiServerProcess,
    debug: DebugClient,
    managers: Vec<ManagerProcess>,
    figures: Figures,
    /// What the current server life injected, as last read.
    injected_this_life: Injected,
    /// When the chaos started: the trace's times count from here.
    started: Instant,
}

impl Chaos {
    /// Turns the faults on and starts the first manager and the driver.
    pub async fn start(settings: Settings, server: ApiServerProcess, debug: DebugClient) -> Self {
        debug.set_faults(&settings.faults).await.unwrap();
        let mut driver = Driver {
            settings,
            server,
            debug,
            managers: Vec::new(),
            figures: Figures::default(),
            injected_this_life: Injected::default(),
            started: Instant::now(),
        };
        driver.spawn_manager();
        let (commands, receiver) = mpsc::channel(1);
        let task = tokio::spawn(driver.run(receiver));
        Self { commands, task }
    }

    /// SIGKILLs the API server and starts it again on its data directory;
    /// returns once it serves (with the faults set again).
    pub async fn kill_apiserver(&self) {
        let (done, killed) = oneshot::channel();
        self.commands
            .send(Command::KillApiServer(done))
            .await
            .unwrap();
        killed.await.unwrap();
    }

    /// Stops the chaos: no more kills, the faults off, the last manager killed
    /// (nothing may run on the market's state directory while the test reads it).
    pub async fn stop(self) -> Outcome {
        drop(self.commands);
        self.task.await.unwrap()
    }
}

impl Driver {
    fn identity(&self) -> String {
        format!(
            "chaos-{}",
            self.figures.manager_kills / self.settings.new_identity_every
        )
    }

    fn spawn_manager(&mut self) {
        let process = ManagerProcess::spawn(self.server.kubeconfig(), &self.identity());
        self.managers.push(process);
    }

    fn lifetime(&self) -> Duration {
        let lifetimes = &self.settings.manager_lifetimes;
        lifetimes[self.figures.manager_kills % lifetimes.len()]
    }

    async fn run(mut self, mut commands: mpsc::Receiver<Command>) -> Outcome {
        let mut manager_dies = tokio::time::Instant::now() + self.lifetime();
        let mut compaction = tokio::time::interval(self.settings.compact_every);
        compaction.tick().await;
        loop {
            tokio::select! {
                command = commands.recv() => match command {
                    Some(Command::KillApiServer(done)) => {
                        self.kill_apiserver().await;
                        let _ = done.send(());
                    }
                    None => break,
                },
                () = tokio::time::sleep_until(manager_dies) => {
                    let current = self.managers.last_mut().expect("a manager runs");
                    current.kill();
                    let killed = current.identity.clone();
                    self.figures.manager_kills += 1;
                    self.spawn_manager();
                    println!(
                        "chaos +{:.1?}: manager {killed} SIGKILLed, {} started",
                        self.started.elapsed(),
                        self.identity()
                    );
                    manager_dies = tokio::time::Instant::now() + self.lifetime();
                }
                _ = compaction.tick() => {
                    if self.debug.compact().await.is_ok() {
                        self.figures.compactions += 1;
                    }
                    self.read_injected().await;
                }
            }
        }
        if let Some(last) = self.managers.last_mut() {
            last.kill();
        }
        self.read_injected().await;
        self.figures.injected = self.figures.injected + self.injected_this_life;
        self.debug
            .set_faults(&FaultConfig::default())
            .await
            .unwrap();
        Outcome {
            figures: self.figures,
            server: self.server,
            managers: self.managers,
        }
    }

    async fn read_injected(&mut self) {
        if let Ok(state) = self.debug.faults().await {
            self.injected_this_life = state.injected;
        }
    }

    async fn kill_apiserver(&mut self) {
        self.read_injected().await;
        self.figures.injected = self.figures.injected + self.injected_this_life;
        self.injected_this_life = Injected::default();
        let started = Instant::now();
        tokio::task::block_in_place(|| {
            self.server.kill();
            self.server.restart();
        });
        self.figures.apiserver_kills += 1;
        // The faults are the process's: set them again at once.
        let (debug, faults) = (&self.debug, &self.settings.faults);
        super::persist("set the faults after a restart", || async move {
            debug.set_faults(faults).await.map(drop)
        })
        .await;
        println!(
            "chaos +{:.1?}: API server SIGKILLed, serving again after {:.1?}",
            self.started.elapsed(),
            started.elapsed()
        );
    }
}
