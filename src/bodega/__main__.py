from bodega.cli.main import run

run()
