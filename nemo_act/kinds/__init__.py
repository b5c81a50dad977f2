"""The stage kinds nemo-act ships, one module per family, each declaring its kinds and holding their row builders.

A module here registers its kinds on import (:func:`nemo_act.stage_kinds.register` with a
:class:`~nemo_act.stage_kinds.StageKind` declared with keywords, its ``rows`` naming a builder of the same module),
exactly as a module of yours named in the config's ``extensions`` does. The registry imports every module of this
package (found on disk, named nowhere) the first time it is read, so adding a kind to nemo-act is one module here
and the YAML of a pipeline that runs it (``conf/pipeline/<name>.yaml``), and adding one from outside is one module
of yours and one YAML: ``tests/test_stage_kinds.py`` builds one each way.

- :mod:`.act`: ACT (``act``), its on-policy rounds (``act_onpolicy``) and the no-reasoning control (``act_noreason``);
- :mod:`.controls`: the SFT-on-choice and DPO controls (``sft_choice``, ``dpo``) on the same pairs;
- :mod:`.imitation`: imitation learning (``il``), its matched-compute control (``il_matched``) and RL (``rl``);
- :mod:`.reflection`: the reflection baselines (``ee``, ``ee_wm``, ``agent_r``, ``sand``) on their audit files.
"""
