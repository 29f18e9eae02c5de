from dse.cli import main


def test_search_runs(capsys):
    assert main(["search", "--target", "xdna2", "--dtype", "int8-int8",
                 "--shape", "1024x1024x1024", "--top", "3"]) == 0
    assert "best configurations" in capsys.readouterr().out
