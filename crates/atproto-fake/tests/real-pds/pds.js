// Starts Bluesky's PDS from its environment variables (PDS_*), as the
// official pds distribution's service/index.js does, and stops it on SIGTERM.
'use strict'
const { PDS, envToCfg, envToSecrets, readEnv } = require('@atproto/pds')

const main = async () => {
  const env = readEnv()
  const pds = await PDS.create(envToCfg(env), envToSecrets(env))
  await pds.start()
  process.on('SIGTERM', async () => {
    await pds.destroy()
    process.exit(0)
  })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
